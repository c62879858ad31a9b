package cluster_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// flood sends body to url from callers goroutines until d has passed and
// returns how many answers came from a deny lease and how many not.
func flood(t *testing.T, url, body string, callers int, d time.Duration) (leased, asked int64) {
	t.Helper()
	var l, a atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for range callers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				resp, err := httpClient.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusTooManyRequests {
					t.Errorf("status %d, want every request of the flood denied", resp.StatusCode)
					return
				}
				if resp.Header.Get("X-Limitnode-Leased") == "true" {
					l.Add(1)
				} else {
					a.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return l.Load(), a.Load()
}

// TestAFloodThroughAFollowerReachesTheLeaderOncePerLease: a key spent for
// the hour, flooded through a follower by 16 callers for 2.5 s: the
// follower answers from its deny lease, and asks the leader once a lease
// (the cap, 1 s, is the lease's length here), not once a request.
func TestAFloodThroughAFollowerReachesTheLeaderOncePerLease(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	follower := c.Followers()[0]
	body := `{"key":"flooded","limit":{"algorithm":"fixed_window","rate":1,"period":"1h"}}`
	if a := post(t, follower.URL()+"/v1/allow", body); a.status != 200 {
		t.Fatalf("the first: %d", a.status)
	}
	// The first denial takes the lease.
	if a := post(t, follower.URL()+"/v1/allow", body); a.status != 429 || a.header.Get("X-Limitnode-Leased") == "true" {
		t.Fatalf("the first denial: %d leased=%q, want a 429 from the leader", a.status, a.header.Get("X-Limitnode-Leased"))
	}
	// 2.5 s of 1 s leases: two or three ends, each asked about once. An
	// election meanwhile (a loaded machine) makes the waiting requests
	// ask on their own: such a flood is run again.
	testenv.WaitFor(t, "a flood without an election to ask the leader once per lease", func() bool {
		term := follower.Node().Status().Term
		leased, asked := flood(t, follower.URL()+"/v1/allow", body, 16, 2500*time.Millisecond)
		if now := follower.Node().Status().Term; now != term {
			t.Logf("an election (term %d to %d) during the flood: %d asks, %d from leases; again", term, now, asked, leased)
			return false
		}
		if asked > 3 || leased < 100 {
			t.Fatalf("the flood asked the leader %d times and was answered from leases %d times; want at most 3 asks", asked, leased)
		}
		t.Logf("%d denials answered from leases, %d asked the leader", leased, asked)
		return true
	})
}

// TestARaiseIsHonouredOnEveryNodeOnceAcknowledged: every node holds a deny
// lease on a spent key of a policy; the policy's limit is raised through a
// follower; the moment the change is acknowledged, the key is admitted on
// every node.
func TestARaiseIsHonouredOnEveryNodeOnceAcknowledged(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	if status, body := do(t, "PUT", c.WaitLeader().URL()+"/v1/policies/tight", `{"limit":{"algorithm":"fixed_window","rate":1,"period":"1h"}}`); status != 200 {
		t.Fatalf("put: %d %v", status, body)
	}
	req := `{"policy":"tight","key":"k"}`
	if a := post(t, c.Nodes[0].URL()+"/v1/allow", req); a.status != 200 {
		t.Fatalf("the first: %d", a.status)
	}
	for _, n := range c.Nodes {
		testenv.WaitFor(t, n.ID+" to answer from a lease", func() bool {
			a := post(t, n.URL()+"/v1/allow", req)
			return a.status == 429 && a.header.Get("X-Limitnode-Leased") == "true"
		})
	}
	if status, body := do(t, "PUT", c.Followers()[0].URL()+"/v1/policies/tight", `{"limit":{"algorithm":"fixed_window","rate":100,"period":"1h"}}`); status != 200 {
		t.Fatalf("raise: %d %v", status, body)
	}
	for _, n := range c.Nodes {
		if a := post(t, n.URL()+"/v1/allow", req); a.status != 200 {
			t.Fatalf("%s after the raise was acknowledged: %d (leased %q), want it admitted", n.ID, a.status, a.header.Get("X-Limitnode-Leased"))
		}
	}
}
