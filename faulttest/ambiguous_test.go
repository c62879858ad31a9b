package faulttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/cluster"
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
	limit := algorithms.Limit{Rate: 10, Period: time.Hour, Burst: 10}
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

// TestAnotherCallersFloodOfIDsNeverChargesARetryTwice: while one caller
// floods the cluster with new request IDs far past its bound, and the
// leader is killed and handed over, another caller sends payments, each
// retried with its ID through any node until it has an answer. Every
// payment is charged exactly once however its attempts went, none of them
// is refused for the flood, and the flood is refused past its bound.
func TestAnotherCallersFloodOfIDsNeverChargesARetryTwice(t *testing.T) {
	t.Parallel()
	const perCaller = 50
	c := testcluster.Start(t, 3, testcluster.Options{Configure: func(cfg *cluster.Config) { cfg.MaxRequestIDsPerCaller = perCaller }})
	limit := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Rate: 1000, Period: time.Hour} // nothing comes back while the test runs
	stop := make(chan struct{})
	var refused, sent atomic.Int64
	var wg sync.WaitGroup
	for flooder := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				node := c.Nodes[i%3].Node()
				if node == nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				sent.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				_, err := node.Allow(ctx, contract.Request{Scope: "mallory", RequestID: fmt.Sprintf("flood-%d-%d", flooder, i), Checks: []contract.Check{{Key: "flood", Limit: limit, Cost: 1}}})
				cancel()
				if e := contract.As(err); e != nil && e.Code == contract.CodeResourceExhausted && e.Field == "request_id" {
					refused.Add(1)
				}
			}
		})
	}
	for deadline := time.Now().Add(testcluster.WaitTimeout); refused.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the flood was never refused: it did not reach its bound (%d sent)", sent.Load())
		}
	}
	const payments = 40
	for p := range payments {
		if p == payments/3 {
			if l := leaderOrNil(c); l != nil {
				l.Kill()
				defer l.Restart()
			}
		}
		if p == 2*payments/3 {
			if l := leaderOrNil(c); l != nil {
				l.Stop()
				l.Restart()
			}
		}
		req := contract.Request{Scope: "alice", RequestID: fmt.Sprintf("payment-%d", p), Checks: []contract.Check{{Key: "payments", Limit: limit, Cost: 1}}}
		for attempt := 0; ; attempt++ {
			node := c.Nodes[(p+attempt)%3].Node()
			if node == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(50+attempt*50)*time.Millisecond)
			d, err := node.Allow(ctx, req)
			cancel()
			if e := contract.As(err); e != nil {
				t.Fatalf("payment %d refused: %v", p, e)
			}
			if err == nil {
				if !d.Allowed {
					t.Fatalf("payment %d denied: %+v", p, d)
				}
				break
			}
			if attempt > 200 {
				t.Fatalf("payment %d has no answer after %d attempts: %v", p, attempt, err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if got := peek(t, c.WaitLeader(), "payments", limit).Remaining; got != 1000-payments {
		t.Fatalf("%d left after %d payments, want each charged once", got, payments)
	}
}
