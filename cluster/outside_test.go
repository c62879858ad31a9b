package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// TestANodeOutsideItsClusterDecidesNothing: a member stopped, its data
// directory lost, and started again on its own forms a cluster of one at
// the address its old cluster still counts as a member's. It used to
// answer decisions alone (10 of 10 admitted on a limit of 5, alternating
// with a healthy node), and later still for the moment between electing
// itself and its old cluster's first dial. Now it holds every decision
// until its old cluster has had time to dial it, then refuses every one,
// over HTTP (allow, batch, forward-auth) and the embedded API alike, with
// a 503 that says why, and only the real cluster admits: from its first
// answer, the stray decides nothing.
func TestANodeOutsideItsClusterDecidesNothing(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitConverged()
	if status, body := do(t, "PUT", c.WaitLeader().URL()+"/v1/policies/per-ip", `{"limit":{"rate":5,"period":"1m"},"key_template":"{ip}"}`); status != 200 {
		t.Fatalf("put: %d %v", status, body)
	}
	healthy, stray := c.WaitLeader(), c.Followers()[0]
	stray.Kill()
	stray.RestartWithoutData()
	const body = `{"key":"k","limit":{"rate":5,"period":"1m","burst":5}}`
	probeUntilRefused(t, stray)
	refused := []struct {
		name, method, path, body string
	}{
		{"an allow", "POST", "/v1/allow", body},
		{"a batch", "POST", "/v1/allow/batch", `{"requests":[` + body + `]}`},
		{"a forward-auth", "GET", "/v1/forward-auth?policy=per-ip&dim.ip=client_ip", ""},
	}
	for _, r := range refused {
		req, err := http.NewRequest(r.method, stray.URL()+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s on the stray node: %d, want 503", r.name, resp.StatusCode)
		}
	}
	_, err := stray.Node().Allow(context.Background(), contract.Request{Checks: []contract.Check{{Key: "k", Limit: algorithms.Limit{Rate: 5, Period: time.Minute, Burst: 5}, Cost: 1}}})
	if !errors.Is(err, contract.ErrNotMember) || !errors.Is(err, contract.ErrNoLeader) {
		t.Errorf("the embedded API on the stray node: %v, want ErrNotMember (an ErrNoLeader)", err)
	}
	admitted := 0
	for i := range 10 {
		node := healthy
		if i%2 == 1 {
			node = stray
		}
		if post(t, node.URL()+"/v1/allow", body).Allowed {
			admitted++
		}
	}
	if admitted != 5 {
		t.Errorf("%d admitted on a limit of 5, alternating the stray node with the leader", admitted)
	}
}

// probeUntilRefused calls the stray node from the moment it answers HTTP
// until it refuses as outside its cluster, and fails the test on any
// decision meanwhile: while it elects itself it answers 503 for want of a
// leader, while it holds its first calls they wait, then it refuses.
func probeUntilRefused(t *testing.T, stray *testcluster.Node) {
	t.Helper()
	decided := 0
	testenv.WaitForWithin(t, time.Minute, "the stray node to refuse decisions as outside its cluster", func() bool {
		a := post(t, stray.URL()+"/v1/allow", `{"key":"probe","limit":{"rate":5}}`)
		if a.status == http.StatusServiceUnavailable && strings.Contains(a.Error, "outside its cluster") {
			return true
		}
		if a.status != http.StatusServiceUnavailable {
			decided++
			t.Errorf("the stray node decided a call alone: %d %q", a.status, a.Error)
		}
		return decided > 0
	})
}

// TestANodeOutsideALeaderlessClusterDecidesNothing: the leader and another
// member stopped, and the leader started again without its data and on
// its own. Nothing leads its old cluster, so only the one member left
// dials it, once per round of its elections, which are further apart than
// a leader's heartbeats; the stray still decides nothing before that
// member's dial makes it refuse, and the key spent before stays spent.
func TestANodeOutsideALeaderlessClusterDecidesNothing(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitConverged()
	stray := c.WaitLeader()
	const body = `{"key":"k","limit":{"rate":5,"period":"1h","burst":5}}`
	for range 5 {
		if a := decided(t, stray.URL()+"/v1/allow", body); !a.Allowed {
			t.Fatalf("spending the key: %d %q", a.status, a.Error)
		}
	}
	c.Followers()[0].Kill()
	stray.Kill()
	stray.RestartWithoutData()
	probeUntilRefused(t, stray)
	if a := post(t, stray.URL()+"/v1/allow", body); a.status != http.StatusServiceUnavailable {
		t.Errorf("the spent key on the stray node: %d %q, want 503", a.status, a.Error)
	}
}

// TestALoneVoterJustStartedHoldsItsCalls: a node that is its cluster's
// only voter holds every call of its first moments (members.awaitDialers,
// here made to last): /readyz says why, and a call whose deadline ends
// first is refused as without a leader, naming the reason; once the hold
// ends the node is ready and decides. A node with other voters never
// holds.
func TestALoneVoterJustStartedHoldsItsCalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		nodes int
		held  bool
	}{
		{"a cluster of one", 1, true},
		{"a follower of a cluster of three", 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := testcluster.Start(t, tt.nodes)
			node := c.Nodes[len(c.Nodes)-1]
			node.Node().HoldCallsUntil(time.Now().Add(time.Hour))
			check := contract.Request{Checks: []contract.Check{{Key: "k", Limit: algorithms.Limit{Rate: 5, Period: time.Minute, Burst: 5}, Cost: 1}}}
			allow := func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				_, err := node.Node().Allow(ctx, check)
				return err
			}
			status, body := do(t, "GET", node.URL()+"/readyz", "")
			err := allow()
			if !tt.held {
				if status != http.StatusOK || err != nil {
					t.Fatalf("held without cause: /readyz %d %v; a call: %v", status, body, err)
				}
				return
			}
			if status != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(body), "only voter") {
				t.Errorf("/readyz while held: %d %v, want 503 naming the hold", status, body)
			}
			if !errors.Is(err, contract.ErrNoLeader) || !strings.Contains(fmt.Sprint(err), "only voter") {
				t.Errorf("a call that ends while held: %v, want ErrNoLeader naming the hold", err)
			}
			node.Node().HoldCallsUntil(time.Now())
			if status, body := do(t, "GET", node.URL()+"/readyz", ""); status != http.StatusOK {
				t.Errorf("/readyz after the hold: %d %v", status, body)
			}
			if a := post(t, node.URL()+"/v1/allow", `{"key":"k","limit":{"rate":5,"period":"1m"}}`); a.status != http.StatusOK || !a.Allowed {
				t.Errorf("a call after the hold: %d %q", a.status, a.Error)
			}
		})
	}
}
