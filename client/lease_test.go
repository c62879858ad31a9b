package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// leaseList is GET /v1/leases' answer: the IDs held and waiting.
type leaseList struct {
	Leases []struct {
		ID          string `json:"id"`
		ExpiresInMS int64  `json:"expires_in_ms"`
	} `json:"leases"`
	Waiting []struct {
		ID string `json:"id"`
	} `json:"waiting"`
}

// held returns the IDs of the leases held.
func (l leaseList) held() []string {
	var ids []string
	for _, h := range l.Leases {
		ids = append(ids, h.ID)
	}
	return ids
}

// listLeases asks node for the leases of key, as it has applied them.
func listLeases(t *testing.T, node *testcluster.Node, key string) leaseList {
	t.Helper()
	resp, err := testcluster.HTTPClient().Get(node.URL() + "/v1/leases?key=" + url.QueryEscape(key))
	if err != nil {
		t.Fatalf("list leases of %q: %v", key, err)
	}
	defer resp.Body.Close()
	var out leaseList
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("list leases of %q: %d %v", key, resp.StatusCode, err)
	}
	return out
}

// receive returns what ch delivers, failing the test after
// testcluster.WaitTimeout.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testcluster.WaitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// acquired is an AcquireLease's outcome, passed from its goroutine.
type acquired struct {
	lease client.Lease
	err   error
}

// acquireAsync runs AcquireLease on its own goroutine.
func acquireAsync(ctx context.Context, cl *client.Client, req client.LeaseRequest) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := cl.AcquireLease(ctx, req)
		ch <- acquired{l, err}
	}()
	return ch
}

// giveBack releases the lease id. A 404 is taken for a release: a node
// that retries a forwarded release whose first attempt's outcome it did not
// learn (a change of leader) answers 404 when that attempt released it.
// The callers check that the slot came free.
func giveBack(t *testing.T, cl *client.Client, id string) {
	t.Helper()
	var apiErr *client.Error
	if err := cl.ReleaseLease(context.Background(), id); errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound {
		t.Logf("release of %s: %v; taken for released", id, err)
	} else if err != nil {
		t.Fatalf("release %s: %v", id, err)
	}
}

// term is the Raft term as node sees it.
func term(t *testing.T, cl *client.Client) uint64 {
	t.Helper()
	st, err := cl.Cluster(context.Background())
	if err != nil {
		t.Fatalf("cluster status: %v", err)
	}
	return st.Term
}

// watchStalls measures, until the returned function is called, the longest
// time a goroutine of this process that sleeps 5ms at a time went without
// running beyond its sleep, and returns it.
func watchStalls() (stop func() time.Duration) {
	done, longest := make(chan struct{}), make(chan time.Duration, 1)
	go func() {
		var worst time.Duration
		for last := time.Now(); ; {
			select {
			case <-done:
				longest <- worst
				return
			case <-time.After(5 * time.Millisecond):
			}
			now := time.Now()
			worst, last = max(worst, now.Sub(last)-5*time.Millisecond), now
		}
	}()
	return func() time.Duration { close(done); return <-longest }
}

// leaseCluster starts a cluster and a client of one of its followers.
func leaseCluster(t *testing.T) (*testcluster.Node, *client.Client) {
	c := testcluster.Start(t, 3)
	node := c.Followers()[0]
	return node, client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, node.URL())
}

// TestAcquireLease asks for the only slot of a group in each state it can
// be in: free; held; held, with the holder giving it back while the request
// waits; held with a full queue.
func TestAcquireLease(t *testing.T) {
	t.Parallel()
	node, cl := leaseCluster(t)
	tests := []struct {
		name string
		hold bool // another caller holds the only slot first
		// queued requests wait in the group's queue first (each with
		// max_queue 10).
		queued   int
		maxWait  time.Duration
		maxQueue int64
		release  bool // the holder gives the slot back once this request waits
		check    func(client.Lease) bool
	}{
		{name: "free", check: func(l client.Lease) bool {
			return l.Granted && l.ID != "" && l.Active == 1 && l.ExpiresIn > 0 && l.ExpiresIn <= 30*time.Second && l.RetryAfter == 0 && l.Waited == 0
		}},
		{name: "held", hold: true, check: func(l client.Lease) bool {
			return !l.Granted && l.ID == "" && l.Active == 1 && l.RetryAfter > 0 && l.Waited == 0
		}},
		{name: "given back while waiting", hold: true, maxWait: 10 * time.Second, maxQueue: 5, release: true, check: func(l client.Lease) bool {
			return l.Granted && l.ID != "" && l.Active == 1 && l.Waiting == 0 && l.Waited > 0
		}},
		{name: "queue full", hold: true, queued: 2, maxWait: 10 * time.Second, maxQueue: 2, check: func(l client.Lease) bool {
			return !l.Granted && l.Active == 1 && l.Waiting == 2 && l.RetryAfter > 0 && l.Waited == 0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			key := "acquire-" + tt.name
			req := client.LeaseRequest{Key: key, Max: 1, TTL: 30 * time.Second}
			var holder client.Lease
			if tt.hold {
				var err error
				if holder, err = cl.AcquireLease(ctx, req); err != nil || !holder.Granted {
					t.Fatalf("the holder: %+v %v", holder, err)
				}
			}
			var waiters []<-chan acquired
			for range tt.queued {
				waiters = append(waiters, acquireAsync(ctx, cl, client.LeaseRequest{Key: key, Max: 1, TTL: 30 * time.Second, MaxWait: 30 * time.Second, MaxQueue: 10}))
			}
			testenv.WaitFor(t, "the queue to fill", func() bool { return len(listLeases(t, node, key).Waiting) == tt.queued })

			req.MaxWait, req.MaxQueue = tt.maxWait, tt.maxQueue
			got := acquireAsync(ctx, cl, req)
			if tt.release {
				testenv.WaitFor(t, "the request to wait", func() bool { return len(listLeases(t, node, key).Waiting) == tt.queued+1 })
				giveBack(t, cl, holder.ID)
			}
			a := receive(t, got, "the answer")
			if a.err != nil || !tt.check(a.lease) || a.lease.Key != key || a.lease.Max != 1 {
				t.Errorf("AcquireLease: %+v %v", a.lease, a.err)
			}
			cancel() // the queued requests leave
			for _, w := range waiters {
				if a := receive(t, w, "a queued request to leave"); !errors.Is(a.err, context.Canceled) {
					t.Errorf("queued request: %+v %v, want context.Canceled", a.lease, a.err)
				}
			}
			testenv.WaitFor(t, "the queue to empty", func() bool { return len(listLeases(t, node, key).Waiting) == 0 })
		})
	}
}

// TestRenewAndReleaseLease: a renewal moves the expiry to its TTL from now;
// a lease given back cannot be given back again or renewed (404).
func TestRenewAndReleaseLease(t *testing.T) {
	t.Parallel()
	_, cl := leaseCluster(t)
	ctx := context.Background()
	l, err := cl.AcquireLease(ctx, client.LeaseRequest{Key: "renewed", Max: 2, TTL: 2 * time.Second})
	if err != nil || !l.Granted || l.ExpiresIn > 2*time.Second {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	r, err := cl.RenewLease(ctx, l.ID, time.Minute)
	if err != nil || !r.Granted || r.ID != l.ID || r.Key != "renewed" || r.Max != 2 || r.Active != 1 ||
		r.ExpiresIn <= 2*time.Second || r.ExpiresIn > time.Minute {
		t.Fatalf("renew: %+v %v; want it to expire in a minute", r, err)
	}
	if err := cl.ReleaseLease(ctx, l.ID); err != nil {
		t.Fatalf("release: %v", err)
	}
	for name, call := range map[string]func() error{
		"release again": func() error { return cl.ReleaseLease(ctx, l.ID) },
		"renew":         func() error { _, err := cl.RenewLease(ctx, l.ID, time.Minute); return err },
	} {
		var apiErr *client.Error
		if err := call(); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "not_found" {
			t.Errorf("%s after the release: %v, want a 404 not_found", name, err)
		}
	}
}

// TestAcquireLeaseWaitsPastTheHTTPTimeout: a request that waits in the queue
// longer than the http.Client's Timeout is not cut off by it.
func TestAcquireLeaseWaitsPastTheHTTPTimeout(t *testing.T) {
	t.Parallel()
	node, cl := leaseCluster(t)
	const timeout = 500 * time.Millisecond
	hc := *testcluster.HTTPClient()
	hc.Timeout = timeout
	short := client.NewWithOptions(client.Options{HTTPClient: &hc}, node.URL())
	ctx := context.Background()
	req := client.LeaseRequest{Key: "patient", Max: 1, TTL: 30 * time.Second}
	holder, err := cl.AcquireLease(ctx, req)
	if err != nil || !holder.Granted {
		t.Fatalf("the holder: %+v %v", holder, err)
	}
	req.MaxWait, req.MaxQueue = 5*time.Second, 1
	start := time.Now()
	got := acquireAsync(ctx, short, req)
	testenv.WaitFor(t, "the request to wait", func() bool { return len(listLeases(t, node, "patient").Waiting) == 1 })
	// The one deliberate wait: past the timeout, by the waiter's clock.
	testenv.WaitFor(t, "the timeout to pass", func() bool { return time.Since(start) > timeout+100*time.Millisecond })
	giveBack(t, cl, holder.ID)
	a := receive(t, got, "the answer")
	if a.err != nil || !a.lease.Granted || a.lease.Waited <= 0 {
		t.Fatalf("AcquireLease after %v: %+v %v; want granted after waiting", time.Since(start), a.lease, a.err)
	}
}

// keptPastTTL runs work under a lease of key with a TTL of 1s; after 2.5s
// the lease must still be held (listed, and a second acquire refused), and
// WithLease must succeed.
func keptPastTTL(t *testing.T, node *testcluster.Node, cl *client.Client, key string) error {
	const ttl = time.Second
	req := client.LeaseRequest{Key: key, Max: 1, TTL: ttl}
	start := time.Now()
	var lost error
	err := cl.WithLease(context.Background(), req, func(ctx context.Context) error {
		var id string
		for id == "" {
			if ctx.Err() != nil { // lost before this node listed it
				return context.Cause(ctx)
			}
			if held := listLeases(t, node, key).held(); len(held) == 1 {
				id = held[0]
			}
			time.Sleep(10 * time.Millisecond)
		}
		testenv.WaitFor(t, "2.5 seconds", func() bool { return time.Since(start) > 5*ttl/2 })
		if held := listLeases(t, node, key).held(); !slices.Contains(held, id) {
			lost = fmt.Errorf("after %v, leases %v, want %s held", time.Since(start), held, id)
		}
		// The leader, deciding at its time, finds the slot held.
		if other, err := cl.AcquireLease(ctx, req); err != nil || other.Granted {
			lost = errors.Join(lost, fmt.Errorf("another acquire after %v: %+v %v, want refused", time.Since(start), other, err))
		}
		return ctx.Err()
	})
	return errors.Join(lost, err)
}

// TestWithLease runs work under a lease: held while it runs and given back
// after, kept past its TTL by renewals, lost (work's context cancelled),
// refused, and abandoned while queued.
func TestWithLease(t *testing.T) {
	t.Parallel()
	node, cl := leaseCluster(t)

	t.Run("held while work runs", func(t *testing.T) {
		t.Parallel()
		const key = "with-held"
		var id string
		err := cl.WithLease(context.Background(), client.LeaseRequest{Key: key, Max: 1, TTL: 30 * time.Second}, func(ctx context.Context) error {
			testenv.WaitFor(t, "the lease to show", func() bool {
				held := listLeases(t, node, key).held()
				if len(held) == 1 {
					id = held[0]
				}
				return id != ""
			})
			return ctx.Err()
		})
		if err != nil {
			t.Fatalf("WithLease: %v", err)
		}
		testenv.WaitFor(t, "the lease to be given back", func() bool { return len(listLeases(t, node, key).Leases) == 0 })
		var apiErr *client.Error
		if err := cl.ReleaseLease(context.Background(), id); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Fatalf("release after WithLease: %v, want a 404", err)
		}
	})

	t.Run("kept past its TTL", func(t *testing.T) {
		t.Parallel()
		// No client keeps a 1s lease across a change of leader, or a stall
		// of the test process (its nodes run in it too) or of the leader's
		// disk that eats the renewals' margin: an attempt that failed is
		// tried again, and a client that does not renew fails every one.
		for attempt := 1; ; attempt++ {
			key := fmt.Sprintf("with-renewed-%d", attempt)
			before, stop := term(t, cl), watchStalls()
			err := keptPastTTL(t, node, cl, key)
			stall := stop()
			if err == nil {
				return
			}
			after := term(t, cl)
			if attempt == 3 {
				t.Fatalf("attempt %d (term %d to %d, longest stall %v): %v", attempt, before, after, stall, err)
			}
			t.Logf("attempt %d, across a change of leader (term %d to %d) or a stall (%v): %v", attempt, before, after, stall, err)
		}
	})

	t.Run("lost", func(t *testing.T) {
		t.Parallel()
		const key = "with-lost"
		other := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, node.URL())
		var cancelled atomic.Bool // with ErrLeaseLost as the cause
		err := cl.WithLease(context.Background(), client.LeaseRequest{Key: key, Max: 1, TTL: 2 * time.Second}, func(ctx context.Context) error {
			var id string
			testenv.WaitFor(t, "the lease to show", func() bool {
				if held := listLeases(t, node, key).held(); len(held) == 1 {
					id = held[0]
				}
				return id != ""
			})
			giveBack(t, other, id) // a 404 here: lost already
			select {
			case <-ctx.Done():
				cancelled.Store(errors.Is(context.Cause(ctx), client.ErrLeaseLost))
				return ctx.Err()
			case <-time.After(30 * time.Second):
				return errors.New("work's context not cancelled")
			}
		})
		if !errors.Is(err, client.ErrLeaseLost) || !errors.Is(err, context.Canceled) || !cancelled.Load() {
			t.Fatalf("WithLease: %v (work's context cancelled for a lost lease: %v), want ErrLeaseLost joined with work's error", err, cancelled.Load())
		}
	})

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		req := client.LeaseRequest{Key: "with-refused", Max: 1, TTL: 30 * time.Second}
		if l, err := cl.AcquireLease(context.Background(), req); err != nil || !l.Granted {
			t.Fatalf("the holder: %+v %v", l, err)
		}
		called := false
		err := cl.WithLease(context.Background(), req, func(context.Context) error { called = true; return nil })
		var refused *client.LeaseRefusedError
		if !errors.As(err, &refused) || refused.Lease.Granted || refused.Lease.RetryAfter <= 0 || called ||
			!strings.Contains(err.Error(), "retry after") {
			t.Fatalf("WithLease: %v (work called: %v), want a *LeaseRefusedError", err, called)
		}
	})

	t.Run("cancelled while queued", func(t *testing.T) {
		t.Parallel()
		const key = "with-cancelled"
		req := client.LeaseRequest{Key: key, Max: 1, TTL: 30 * time.Second}
		if l, err := cl.AcquireLease(context.Background(), req); err != nil || !l.Granted {
			t.Fatalf("the holder: %+v %v", l, err)
		}
		req.MaxWait, req.MaxQueue = 30*time.Second, 5
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var called atomic.Bool
		done := make(chan error, 1)
		go func() {
			done <- cl.WithLease(ctx, req, func(context.Context) error { called.Store(true); return nil })
		}()
		testenv.WaitFor(t, "the request to wait", func() bool { return len(listLeases(t, node, key).Waiting) == 1 })
		cancel()
		if err := receive(t, done, "WithLease to return"); !errors.Is(err, context.Canceled) || called.Load() {
			t.Fatalf("WithLease: %v (work called: %v), want context.Canceled", err, called.Load())
		}
		testenv.WaitFor(t, "the request to leave the queue", func() bool { return len(listLeases(t, node, key).Waiting) == 0 })
	})
}
