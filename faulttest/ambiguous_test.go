package faulttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/testcluster"
)

// TestTimedOutRequestRetriedAcrossALeaderChangeIsChargedOnce: the leader's
// links are slowed so that a request's entry commits only after the caller
// gave up (its outcome is unknown to the caller). Leadership then moves, and
// the caller retries with the same request ID through other nodes, over
// both APIs: every retry gets the first decision, and the key is charged
// once. (On a cluster with tokens, a request ID is its caller's: the HTTP
// caller's token makes another caller than the Go API, charged once too.)
func TestTimedOutRequestRetriedAcrossALeaderChangeIsChargedOnce(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	limit := algorithms.Limit{Rate: 10, PeriodNanos: int64(time.Hour), Burst: 10}
	leader := c.WaitLeader()
	for _, o := range c.Nodes {
		if o != leader {
			c.Net.Delay(leader.ID, o.ID, 400*time.Millisecond)
		}
	}
	req := contract.Request{RequestID: "order-7", Checks: []contract.Check{{Key: "charged-once", Limit: limit, Cost: 3}}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := leader.Node().Allow(ctx, req)
	cancel()
	if !errors.Is(err, contract.ErrOutcomeUnknown) && !errors.Is(err, contract.ErrNoLeader) {
		t.Fatalf("a request cut short by its deadline answered %v", err)
	}
	c.Net.HealAll()
	leader.Stop() // hand leadership over
	next := c.WaitLeader()

	var first contract.Decision
	for i, n := range c.Running() {
		d, err := n.Node().Allow(context.Background(), req)
		if err != nil {
			t.Fatalf("retry on %s: %v", n.ID, err)
		}
		if i == 0 {
			first = d
		}
		if !d.Allowed || d.Checks[0].Remaining != 7 || d.AtNanos != first.AtNanos {
			t.Fatalf("retry on %s: %+v, want the first decision (7 left)", n.ID, d)
		}
	}
	// Over HTTP the same ID is the same request, unless the cluster has
	// tokens: request IDs are then the token's own, and the token's caller
	// is not the Go API's, so its request is charged, once.
	want := 7
	if strings.HasPrefix(next.URL(), "https://") {
		want = 4
	}
	const body = `{"key":"charged-once","limit":{"rate":10,"period":"1h"},"cost":3,"request_id":"order-7"}`
	for range 2 {
		resp, err := testcluster.HTTPClient().Post(next.URL()+"/v1/allow", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(data), fmt.Sprintf(`"remaining":%d`, want)) {
			t.Fatalf("retry over HTTP: %d %s, want %d left", resp.StatusCode, data, want)
		}
	}
	leader.Restart()
	c.WaitConverged()
	if got := peek(t, leader, "charged-once", limit).Remaining; got != int64(want) {
		t.Fatalf("%d left after one request of cost 3 and its retries, want %d", got, want)
	}
}
