package cluster_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/testcluster"
)

// manualClock is a clock the test moves by hand, so that cluster time (the
// leader's stamp on each batch) and therefore every figure in a response is
// exact.
type manualClock struct{ nanos atomic.Int64 }

func (c *manualClock) now() time.Time          { return time.Unix(0, c.nanos.Load()) }
func (c *manualClock) advance(d time.Duration) { c.nanos.Add(int64(d)) }

// TestEveryAlgorithmEndToEnd drives each algorithm through /v1/allow on a
// three-node cluster, on all nodes in turn, with a hand-moved clock, and
// checks every field of every answer and the headers that go with it.
func TestEveryAlgorithmEndToEnd(t *testing.T) {
	t.Parallel()
	clock := &manualClock{}
	clock.nanos.Store(int64(30_000_000) * int64(time.Minute)) // aligned to 10s windows
	// The hand-moved clock is the truth here, so the leader may follow its
	// jumps (normally a leader's clock may not outrun real time), and no
	// node answers from a deny lease, which real time would time.
	c := testcluster.Start(t, 3, testcluster.Options{Clock: clock.now, Configure: func(cfg *cluster.Config) {
		cfg.MaxClockStep, cfg.MaxClockRate, cfg.DenyLeaseCap = 1000*time.Hour, 1e9, -1
	}})

	type step struct {
		advance    time.Duration
		wantStatus int
		remaining  int64
		resetMS    int64
		retryMS    int64
	}
	// Each limit allows 2 per 10s. Three requests at once, then one 5s later.
	tests := []struct {
		algorithm string
		steps     []step
	}{
		{"token_bucket", []step{{0, 200, 1, 5000, 0}, {0, 200, 0, 10000, 0}, {0, 429, 0, 10000, 5000}, {5 * time.Second, 200, 0, 10000, 0}}},
		{"leaky_bucket", []step{{0, 200, 1, 5000, 0}, {0, 200, 0, 10000, 0}, {0, 429, 0, 10000, 5000}, {5 * time.Second, 200, 0, 10000, 0}}},
		{"gcra", []step{{0, 200, 1, 5000, 0}, {0, 200, 0, 10000, 0}, {0, 429, 0, 10000, 5000}, {5 * time.Second, 200, 0, 10000, 0}}},
		{"fixed_window", []step{{0, 200, 1, 10000, 0}, {0, 200, 0, 10000, 0}, {0, 429, 0, 10000, 10000}, {5 * time.Second, 429, 0, 5000, 5000}}},
		{"sliding_window_log", []step{{0, 200, 1, 10000, 0}, {0, 200, 0, 10000, 0}, {0, 429, 0, 10000, 10000}, {5 * time.Second, 429, 0, 5000, 5000}}},
		// The two requests weigh on the next window too: at 15s they
		// count 2 × 5/10 = 1, so one more fits then.
		{"sliding_window_counter", []step{{0, 200, 1, 20000, 0}, {0, 200, 0, 20000, 0}, {0, 429, 0, 20000, 15000}, {5 * time.Second, 429, 0, 15000, 10000}}},
	}
	// The clock is shared, so the algorithms run one after another, each
	// on its own key, starting on a fresh 10s window.
	for _, tt := range tests {
		clock.nanos.Store((clock.nanos.Load()/int64(20*time.Second) + 1) * int64(20*time.Second))
		body := fmt.Sprintf(`{"key":"e2e:%s","limit":{"algorithm":%q,"rate":2,"period":"10s"}}`, tt.algorithm, tt.algorithm)
		for i, s := range tt.steps {
			clock.advance(s.advance)
			node := c.Nodes[i%len(c.Nodes)]
			a := decided(t, node.URL()+"/v1/allow", body)
			got := fmt.Sprintf("%d remaining=%d reset=%d retry=%d", a.status, a.Remain, a.ResetMS, a.Retry)
			want := fmt.Sprintf("%d remaining=%d reset=%d retry=%d", s.wantStatus, s.remaining, s.resetMS, s.retryMS)
			if got != want || a.Limit != 2 {
				t.Fatalf("%s step %d on %s: got %s limit=%d, want %s limit=2", tt.algorithm, i, node.ID, got, a.Limit, want)
			}
			h := a.header
			if h.Get("RateLimit-Limit") != "2" || h.Get("RateLimit-Remaining") != strconv.FormatInt(s.remaining, 10) ||
				h.Get("RateLimit-Reset") != strconv.FormatInt((s.resetMS+999)/1000, 10) ||
				h.Get("RateLimit-Policy") != `"default";q=2;w=10` {
				t.Fatalf("%s step %d: headers %v", tt.algorithm, i, h)
			}
			if s.wantStatus == 429 {
				retry, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64)
				if err != nil || retry*1000 < s.retryMS || retry*1000 > s.retryMS+1000+max(1000, s.retryMS/10) {
					t.Fatalf("%s step %d: Retry-After %q for retry_after_ms %d", tt.algorithm, i, h.Get("Retry-After"), s.retryMS)
				}
			}
		}
	}
}
