package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// httpClient calls any test cluster, plain or secure (LIMITNODE_TEST_SECURE=1).
var httpClient = &http.Client{Timeout: 20 * time.Second, Transport: testcluster.HTTPClient().Transport}

type allowAnswer struct {
	status  int
	header  http.Header
	Allowed bool   `json:"allowed"`
	Limit   int64  `json:"limit"`
	Remain  int64  `json:"remaining"`
	ResetMS int64  `json:"reset_after_ms"`
	Retry   int64  `json:"retry_after_ms"`
	Code    string `json:"code"`
	Field   string `json:"field"`
	Error   string `json:"error"`
}

func post(t testing.TB, url, body string) allowAnswer {
	t.Helper()
	resp, err := httpClient.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	a := allowAnswer{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("answer of %s is not JSON: %q", url, data)
	}
	return a
}

// requestIDs numbers the request IDs decided gives its requests.
var requestIDs atomic.Int64

// decided posts an allow request (body, a JSON object) to url under a
// request ID of its own, and asks again with the same ID while the cluster
// cannot decide (503: no leader, or an outcome unknown after an election
// on a loaded machine), which the cluster charges once. It returns the
// decision.
func decided(t testing.TB, url, body string) allowAnswer {
	t.Helper()
	body = fmt.Sprintf(`{"request_id":"decided-%d",`, requestIDs.Add(1)) + strings.TrimPrefix(strings.TrimSpace(body), "{")
	var a allowAnswer
	testenv.WaitFor(t, "a decision from "+url, func() bool {
		a = post(t, url, body)
		return a.status != http.StatusServiceUnavailable
	})
	return a
}

// TestConcurrentBurstAtThreeNodesAdmitsOnlyTheLimit replays the failure limitnode exists
// to prevent: 380 requests for one key limited to 100 a minute, fired
// concurrently at all three nodes. Four in-memory limiters admitted all of
// them; the cluster
// admits 100, plus at most what refills while the burst lasts.
func TestConcurrentBurstAtThreeNodesAdmitsOnlyTheLimit(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	const body = `{"key":"api-key:abc123","limit":{"rate":100,"period":"1m"}}`
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for worker := range 38 {
		wg.Go(func() {
			for i := range 10 {
				node := c.Nodes[(worker+i)%len(c.Nodes)]
				a := decided(t, node.URL()+"/v1/allow", body)
				switch a.status {
				case http.StatusOK:
					admitted.Add(1)
				case http.StatusTooManyRequests:
					denied.Add(1)
					if secs, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || secs < 1 {
						t.Errorf("429 with Retry-After %q", a.header.Get("Retry-After"))
					}
				default:
					t.Errorf("status %d (%s) from %s", a.status, a.Code, node.ID)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	refill := int64(100 * elapsed / time.Minute)
	t.Logf("380 requests in %s: %d admitted, %d denied (bound 100 + %d refilled)", elapsed, admitted.Load(), denied.Load(), refill)
	if got := admitted.Load(); got < 100 || got > 100+refill {
		t.Fatalf("admitted %d, want between 100 and %d", got, 100+refill)
	}
}

// TestSpentTokensSurviveFailoverAndRestart spends half a bucket, kills the
// leader, and checks that the new leader serves within seconds with the
// spent tokens still spent; then stops and restarts every node and checks
// again.
func TestSpentTokensSurviveFailoverAndRestart(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	// 100 an hour: one token refills every 36s, so the test's own
	// duration can refill at most a couple.
	const spend = `{"key":"tenant:7","limit":{"rate":100,"period":"1h"}}`
	const peek = `{"key":"tenant:7","limit":{"rate":100,"period":"1h"},"cost":0}`
	start := time.Now()
	for i := range 50 {
		if a := decided(t, c.Nodes[i%3].URL()+"/v1/allow", spend); a.status != 200 {
			t.Fatalf("spend %d: status %d", i, a.status)
		}
	}
	maxRefill := func() int64 { return int64(100*time.Since(start)/time.Hour) + 1 }
	checkRemaining := func(url, when string) {
		t.Helper()
		a := decided(t, url+"/v1/allow", peek)
		if a.status != 200 || a.Remain < 50 || a.Remain > 50+maxRefill() {
			t.Fatalf("%s: status %d remaining %d, want 50 (+ at most %d refilled)", when, a.status, a.Remain, maxRefill())
		}
	}

	leader := c.WaitLeader()
	leader.Kill()
	killedAt := time.Now()
	survivor := c.Running()[0]
	testenv.WaitFor(t, "a decision after killing the leader", func() bool { return post(t, survivor.URL()+"/v1/allow", peek).status == 200 })
	t.Logf("failover: %s from killing the leader to the next decision", time.Since(killedAt))
	checkRemaining(survivor.URL(), "after failover")

	leader.Restart()
	c.WaitConverged()
	checkRemaining(leader.URL(), "on the old leader after it rejoined")

	c.StopAll()
	for _, n := range c.Nodes {
		n.Restart()
	}
	c.WaitConverged()
	for _, n := range c.Nodes {
		checkRemaining(n.URL(), "after restarting every node on "+n.ID)
	}
}

// TestRequestIDIsChargedOnceOnAnyNode sends one request ID to every node in
// turn: the first consumes, the others get the same decision for free.
func TestRequestIDIsChargedOnceOnAnyNode(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	const body = `{"key":"k","limit":{"rate":10,"period":"1h"},"cost":3,"request_id":"order-42"}`
	var first allowAnswer
	for i, n := range c.Nodes {
		a := post(t, n.URL()+"/v1/allow", body)
		if i == 0 {
			first = a
		}
		if a.status != 200 || a.Remain != first.Remain {
			t.Fatalf("attempt on %s: status %d remaining %d, want the first answer (remaining %d)", n.ID, a.status, a.Remain, first.Remain)
		}
	}
	if a := decided(t, c.Nodes[1].URL()+"/v1/allow", `{"key":"k","limit":{"rate":10,"period":"1h"},"cost":0}`); a.Remain != 7 {
		t.Fatalf("remaining %d after three attempts with one ID, want 7", a.Remain)
	}
}

// TestBadRequestsLeaveTheClusterServing sends malformed and invalid bodies
// to a follower over a real connection and checks the answers and that the
// node then decides as usual.
func TestBadRequestsLeaveTheClusterServing(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	url := c.Followers()[0].URL() + "/v1/allow"
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantField  string
	}{
		{"malformed JSON", `{"key":"k","limit":`, 400, ""},
		{"an unknown field", `{"key":"k","limit":{"rate":1},"extra":1}`, 400, "extra"},
		{"an empty key", `{"key":"","limit":{"rate":1}}`, 400, "key"},
		{"a key over 512 bytes", `{"key":"` + strings.Repeat("x", 513) + `","limit":{"rate":1}}`, 400, "key"},
		{"rate 0", `{"key":"k","limit":{"rate":0}}`, 400, "limit.rate"},
		{"an unparseable period", `{"key":"k","limit":{"rate":1,"period":"soon"}}`, 400, "limit.period"},
		{"a zero period", `{"key":"k","limit":{"rate":1,"period":"0s"}}`, 400, "limit.period"},
		{"a negative cost", `{"key":"k","limit":{"rate":5},"cost":-2}`, 400, "cost"},
		{"a cost above burst", `{"key":"k","limit":{"rate":5},"cost":6}`, 400, "cost"},
		{"an oversized body", `{"key":"` + strings.Repeat("x", 100<<10) + `"}`, 413, ""},
	}
	for _, tt := range tests {
		a := post(t, url, tt.body)
		if a.status != tt.wantStatus || a.Field != tt.wantField || a.Code == "" {
			t.Errorf("%s: got %d code %q field %q, want %d field %q", tt.name, a.status, a.Code, a.Field, tt.wantStatus, tt.wantField)
		}
	}
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET /v1/allow: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if a := decided(t, url, `{"key":"k","limit":{"rate":5}}`); a.status != 200 || a.Remain != 4 {
		t.Fatalf("a good request after the bad ones: %d remaining %d", a.status, a.Remain)
	}
}

// TestEmbeddedAPIAndMembership uses the Go API directly: decisions from
// every node agree, and a member can be removed and the rest keep deciding.
func TestEmbeddedAPIAndMembership(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	limit := algorithms.Limit{Rate: 6, Period: time.Hour, Burst: 6}
	req := contract.Request{Checks: []contract.Check{{Key: "embedded", Limit: limit, Cost: 1}}}
	ctx := context.Background()
	for i := range 9 {
		d, err := c.Nodes[i%3].Node().Allow(ctx, req)
		if err != nil {
			t.Fatalf("Allow %d: %v", i, err)
		}
		if want := i < 6; d.Allowed != want {
			t.Fatalf("request %d allowed=%v, want %v", i, d.Allowed, want)
		}
	}
	if _, err := c.Nodes[0].Node().Allow(ctx, contract.Request{}); err == nil {
		t.Fatal("an empty request was accepted")
	}

	// Remove a follower through another follower's HTTP API.
	followers := c.Followers()
	removed, via := followers[0], followers[1]
	hreq, _ := http.NewRequest(http.MethodDelete, via.URL()+"/v1/cluster/nodes/"+removed.ID, nil)
	resp, err := httpClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("DELETE member: %d", resp.StatusCode)
	}
	removed.Kill()
	leader := c.WaitLeader()
	if got := len(leader.Node().Status().Members); got != 2 {
		t.Fatalf("%d members after removal, want 2", got)
	}
	// Under a request ID: an election on a loaded machine may leave an
	// attempt's outcome unknown, and the retry is then charged once.
	after := contract.Request{RequestID: "after-removal", Checks: []contract.Check{{Key: "after-removal", Limit: limit, Cost: 1}}}
	var d contract.Decision
	testenv.WaitFor(t, "a decision after the removal", func() bool {
		d, err = via.Node().Allow(ctx, after)
		return !errors.Is(err, contract.ErrNoLeader) && !errors.Is(err, contract.ErrOutcomeUnknown)
	})
	if err != nil || !d.Allowed {
		t.Fatalf("after removal: %+v, %v", d, err)
	}
	hreq, _ = http.NewRequest(http.MethodDelete, via.URL()+"/v1/cluster/nodes/nobody", nil)
	if resp, err := httpClient.Do(hreq); err != nil || resp.StatusCode != 404 {
		t.Fatalf("DELETE unknown member: %v %v", resp, err)
	}
}

// TestGracefulStopHandsLeadershipOver: a leader that stops cleanly hands
// over, and the others keep deciding.
func TestGracefulStopHandsLeadershipOver(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	old := c.WaitLeader()
	old.Stop()
	next := c.WaitLeader()
	if next == old {
		t.Fatal("the stopped node still leads")
	}
	for _, n := range c.Running() {
		if a := decided(t, n.URL()+"/v1/allow", `{"key":"k","limit":{"rate":5}}`); a.status != 200 {
			t.Fatalf("after hand-over, %s answered %d", n.ID, a.status)
		}
	}
}

// BenchmarkAllowHTTP reports /v1/allow decisions per second on a 3-node
// cluster, with callers spread over all nodes.
func BenchmarkAllowHTTP(b *testing.B) {
	c := testcluster.Start(b, 3)
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range callers {
				wg.Go(func() {
					url := c.Nodes[w%3].URL() + "/v1/allow"
					body := []byte(fmt.Sprintf(`{"key":"bench-%d","limit":{"rate":1000000000}}`, w))
					for next.Add(1) <= int64(b.N) {
						resp, err := httpClient.Post(url, "application/json", bytes.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// TestSnapshotsCarryTheState makes Raft snapshot and truncate its log often,
// so that a node that was down catches up from an installed snapshot, and a
// restart of every node restores from snapshots; the decisions stay the same.
func TestSnapshotsCarryTheState(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{Configure: func(cfg *cluster.Config) {
		cfg.SnapshotThreshold = 16
		cfg.SnapshotInterval = 20 * time.Millisecond
		cfg.TrailingLogs = 4
	}})
	ctx := context.Background()
	limit := algorithms.Limit{Rate: 10, Period: time.Hour, Burst: 10}
	spend := func(node *cluster.Node, key string, cost int64) {
		t.Helper()
		req := contract.Request{RequestID: fmt.Sprint("spend-", requestIDs.Add(1)), Checks: []contract.Check{{Key: key, Limit: limit, Cost: cost}}}
		var d contract.Decision
		testenv.WaitFor(t, "a decision on spending "+key, func() bool {
			var err error
			d, err = node.Allow(ctx, req)
			if err != nil && !errors.Is(err, contract.ErrNoLeader) && !errors.Is(err, contract.ErrOutcomeUnknown) {
				t.Fatalf("spend %d on %s: %v", cost, key, err)
			}
			return err == nil
		})
		if !d.Allowed {
			t.Fatalf("spend %d on %s: %+v", cost, key, d)
		}
	}
	remaining := func(node *cluster.Node, key string) int64 {
		t.Helper()
		var d contract.Decision
		testenv.WaitFor(t, "a peek of "+key+" to be answered", func() bool {
			var err error
			d, err = node.Allow(ctx, contract.Request{Checks: []contract.Check{{Key: key, Limit: limit, Peek: true}}})
			if err != nil && !errors.Is(err, contract.ErrNoLeader) && !errors.Is(err, contract.ErrOutcomeUnknown) {
				t.Fatalf("peek %s: %v", key, err)
			}
			return err == nil
		})
		return d.Checks[0].Remaining
	}
	lagging := c.Followers()[0]
	lagging.Kill()
	// Each call below is its own Raft entry: far more than the threshold.
	for i := range 60 {
		spend(c.Running()[i%2].Node(), fmt.Sprintf("key-%d", i%20), 1+int64(i%3))
	}
	leader := c.WaitLeader()
	testenv.WaitFor(t, "the leader to take a snapshot", func() bool {
		spend(leader.Node(), "tick", 0)
		return leader.Node().Status().LastSnapshotIndex >= 40
	})
	want := map[string]int64{}
	for i := range 20 {
		key := fmt.Sprintf("key-%d", i)
		want[key] = remaining(leader.Node(), key)
	}

	lagging.Restart()
	c.WaitConverged()
	if got := lagging.Node().Status().LastSnapshotIndex; got == 0 {
		t.Fatal("the lagging node caught up without a snapshot; the test did not exercise InstallSnapshot")
	}
	for key, w := range want {
		if got := remaining(lagging.Node(), key); got != w {
			t.Fatalf("%s on the caught-up node: %d remaining, want %d", key, got, w)
		}
	}

	c.StopAll()
	for _, n := range c.Nodes {
		n.Restart()
	}
	c.WaitConverged()
	for key, w := range want {
		if got := remaining(c.Nodes[0].Node(), key); got != w {
			t.Fatalf("%s after restarting every node: %d remaining, want %d", key, got, w)
		}
	}
}

// TestNoSyncKeepsDecisionsAcrossProcessRestarts: without fsync, decisions
// still survive stopping and restarting every node (the OS keeps what was
// written; only a power loss of a majority could lose it).
func TestNoSyncKeepsDecisionsAcrossProcessRestarts(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{Configure: func(cfg *cluster.Config) { cfg.NoSync = true }})
	const spend = `{"key":"nosync","limit":{"rate":10,"period":"1h"},"cost":4}`
	if a := decided(t, c.Nodes[1].URL()+"/v1/allow", spend); a.status != 200 || a.Remain != 6 {
		t.Fatalf("spend: %d remaining %d", a.status, a.Remain)
	}
	c.StopAll()
	for _, n := range c.Nodes {
		n.Restart()
	}
	c.WaitConverged()
	if a := decided(t, c.Nodes[2].URL()+"/v1/allow", `{"key":"nosync","limit":{"rate":10,"period":"1h"},"cost":0}`); a.Remain != 6 {
		t.Fatalf("after restarting every node: %d remaining, want 6", a.Remain)
	}
}

// TestRemovedMemberStaysOut removes a member that keeps running: it does not
// add itself back (its self-registration used to re-join it within a
// second), its /readyz says it was removed (not that it has yet to join),
// before and after a restart, it decides nothing, and an operator's join
// brings it back.
func TestRemovedMemberStaysOut(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 4)
	leader := c.WaitLeader()
	removed := c.Followers()[0]
	if status, body := do(t, "DELETE", leader.URL()+"/v1/cluster/nodes/"+removed.ID, ""); status != 200 {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	isMember := func() bool {
		for _, m := range leader.Node().Status().Members {
			if m.ID == removed.ID {
				return true
			}
		}
		return false
	}
	// Three self-registration ticks (one a second) must pass without it.
	for deadline := time.Now().Add(3500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if isMember() {
			t.Fatalf("%s added itself back after its removal", removed.ID)
		}
	}
	saysRemoved := func() bool {
		status, body := do(t, "GET", removed.URL()+"/readyz", "")
		return status == 503 && strings.Contains(fmt.Sprint(body["reason"]), "this node was removed")
	}
	testenv.WaitFor(t, "the removed node to say it was removed", saysRemoved)
	removed.Kill()
	removed.Restart()
	testenv.WaitFor(t, "the removed node, restarted, to say it was removed", saysRemoved)
	limit := algorithms.Limit{Rate: 10, Period: time.Minute, Burst: 10}
	if a := post(t, removed.URL()+"/v1/allow", `{"key":"k","limit":{"rate":10,"period":"1m"}}`); a.status != 503 {
		t.Fatalf("the removed node decided: %d", a.status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := leader.Node().Join(ctx, contract.Member{ID: removed.ID, RaftAddr: removed.RaftAddr, HTTPAddr: removed.HTTPAddr}, contract.MemberChange{}); err != nil {
		t.Fatalf("join again: %v", err)
	}
	testenv.WaitFor(t, "the re-joined node to be ready", func() bool {
		status, _ := do(t, "GET", removed.URL()+"/readyz", "")
		return status == 200 && isMember()
	})
	if d, err := removed.Node().Allow(ctx, contract.Request{Checks: []contract.Check{{Key: "back", Limit: limit, Cost: 1}}}); err != nil || !d.Allowed {
		t.Fatalf("the re-joined node: %+v, %v", d, err)
	}
}

// TestMembersHealthIsVisible: every node's /v1/cluster shows each member as
// reachable, and a member that is killed shows as unreachable on the
// survivors' pages, with its last contact growing.
func TestMembersHealthIsVisible(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	type node struct {
		ID            string `json:"id"`
		Reachable     *bool  `json:"reachable"`
		LastContactMS *int64 `json:"last_contact_ms"`
	}
	view := func(of *testcluster.Node) map[string]node {
		resp, err := httpClient.Get(of.URL() + "/v1/cluster")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Nodes []node }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		m := map[string]node{}
		for _, n := range out.Nodes {
			m[n.ID] = n
		}
		return m
	}
	reachable := func(n node) bool { return n.Reachable != nil && *n.Reachable }
	for _, of := range c.Nodes {
		testenv.WaitFor(t, of.ID+" to see every member reachable", func() bool {
			v := view(of)
			return len(v) == 3 && reachable(v["n1"]) && reachable(v["n2"]) && reachable(v["n3"])
		})
	}
	victim := c.Followers()[0]
	victim.Kill()
	for _, of := range c.Running() {
		testenv.WaitFor(t, of.ID+" to see "+victim.ID+" unreachable", func() bool {
			n := view(of)[victim.ID]
			return n.Reachable != nil && !*n.Reachable && n.LastContactMS != nil && *n.LastContactMS >= 1000
		})
	}
}

// TestANodeThatCannotWriteSaysSo: a node whose data directory refuses
// writes (here its write probe's path is taken by a directory, as a full or
// read-only disk would refuse it) answers /readyz 503 with the reason, and
// ready again once it can write. It used to stay ready while falling behind.
func TestANodeThatCannotWriteSaysSo(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	n := c.Followers()[0]
	probe := filepath.Join(n.DataDir, ".write-probe")
	if err := os.Remove(probe); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.Mkdir(probe, 0o700); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the node to say it cannot write", func() bool {
		status, body := do(t, "GET", n.URL()+"/readyz", "")
		reason, _ := body["reason"].(string)
		return status == 503 && strings.Contains(reason, "cannot write to the data directory")
	})
	if err := os.Remove(probe); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the node to be ready again", func() bool {
		status, _ := do(t, "GET", n.URL()+"/readyz", "")
		return status == 200
	})
}

// TestARemovedLeaderSaysSo: a leader removed from the cluster used to keep
// running with Raft stopped, /readyz 200 and every allow a 503. It now says
// in /readyz that it was removed, decides nothing, and the others go on.
func TestARemovedLeaderSaysSo(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	old := c.WaitLeader()
	if status, body := do(t, "DELETE", old.URL()+"/v1/cluster/nodes/"+old.ID, ""); status != 200 {
		t.Fatalf("DELETE the leader: %d %v", status, body)
	}
	testenv.WaitFor(t, "the removed leader to say so", func() bool {
		status, body := do(t, "GET", old.URL()+"/readyz", "")
		reason, _ := body["reason"].(string)
		return status == 503 && strings.Contains(reason, "removed")
	})
	var survivor *testcluster.Node
	for _, n := range c.Nodes {
		if n != old {
			survivor = n
		}
	}
	testenv.WaitFor(t, "the others to decide", func() bool {
		return post(t, survivor.URL()+"/v1/allow", `{"key":"k","limit":{"rate":5,"period":"1h"}}`).status == 200
	})
	if a := post(t, old.URL()+"/v1/allow", `{"key":"k","limit":{"rate":5,"period":"1h"}}`); a.status != 503 {
		t.Fatalf("the removed leader decided: %d", a.status)
	}
}

// TestFormClusterRefusals: a member list without the node itself is a bad
// argument, and a node that belongs to a cluster cannot form another; both
// leave the cluster as it was.
func TestFormClusterRefusals(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	node := c.WaitLeader().Node()
	self := contract.Member{ID: node.ID(), RaftAddr: node.RaftAddr()}
	other := contract.Member{ID: "elsewhere", RaftAddr: "127.0.0.1:1"}
	tests := []struct {
		name    string
		members []contract.Member
		want    error
	}{
		{"without this node", []contract.Member{other}, contract.ErrInvalid},
		{"an invalid member", []contract.Member{self, {ID: "", RaftAddr: "127.0.0.1:2"}}, contract.ErrInvalid},
		{"a node with state", []contract.Member{self, other}, contract.ErrConflict},
	}
	for _, tt := range tests {
		if err := node.FormCluster(tt.members); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if got := len(node.Status().Members); got != 1 {
		t.Fatalf("%d members after refused FormCluster calls, want 1", got)
	}
}

// BenchmarkOneRaftGroup measures how far one Raft group goes: callers
// spread over a 3-node cluster's embedded API on distinct keys, reporting
// decisions/s, Raft entries/s (the applied index's growth), requests per
// entry, and the bytes a second the leader appends and sends to each
// follower (entries re-encoded at the measured requests per entry).
// go test -run XXX -bench OneRaftGroup -benchtime 5s ./cluster
func BenchmarkOneRaftGroup(b *testing.B) {
	for _, callers := range []int{64, 256} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			c := testcluster.Start(b, 3)
			leader := c.WaitLeader()
			limit := algorithms.Limit{Rate: 1_000_000_000, Period: time.Second, Burst: 1_000_000_000}
			startIndex := leader.Node().Status().AppliedIndex
			var decided atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			per := b.N/callers + 1
			for i := range callers {
				node := c.Nodes[i%len(c.Nodes)].Node()
				wg.Go(func() {
					for j := range per {
						d, err := node.Allow(context.Background(), contract.Request{Checks: []contract.Check{{Key: fmt.Sprintf("k-%d-%d", i, j%1000), Limit: limit, Cost: 1}}})
						if err == nil && d.Allowed {
							decided.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start).Seconds()
			b.StopTimer()
			entries := float64(leader.Node().Status().AppliedIndex - startIndex)
			perEntry := float64(decided.Load()) / max(entries, 1)
			reqs := make([]fsm.Request, int(perEntry+0.5))
			for i := range reqs {
				reqs[i] = fsm.Request{Checks: []fsm.Check{fsm.CheckOf(contract.Check{Key: fmt.Sprintf("k-%d-%d", i, i), Limit: limit, Cost: 1})}}
			}
			data, err := fsm.Encode(fsm.CommandAllow, &fsm.AllowCommand{NowNanos: time.Now().UnixNano(), Requests: reqs})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(decided.Load())/elapsed, "decisions/s")
			b.ReportMetric(entries/elapsed, "entries/s")
			b.ReportMetric(perEntry, "requests/entry")
			b.ReportMetric(float64(len(data))*entries/elapsed, "entry-bytes/s")
		})
	}
}
