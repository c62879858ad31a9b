package denylease

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/holdtime"
)

// fakeNow is a clock a test moves by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeNow) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func denial(denyFor time.Duration) fsm.Result {
	return fsm.Result{Checks: []fsm.CheckResult{{Decision: algorithms.Decision{RetryAfter: denyFor}}}, DenyAtNanos: 1e18, DenyForNanos: int64(denyFor)}
}

func TestDenyLeaseLengths(t *testing.T) {
	t.Parallel()
	table := New(time.Second, 0.01, time.Now)
	tests := []struct {
		name   string
		result fsm.Result
		want   time.Duration
	}{
		{"a short denial, less what cluster time may run ahead and the margin", denial(101 * time.Millisecond), 100*time.Millisecond - holdtime.Margin},
		{"a long denial, the cap", denial(time.Hour), time.Second},
		{"a denial that says nothing of how long it holds", denial(0), 0},
		{"an admission", fsm.Result{Allowed: true}, 0},
	}
	for _, tt := range tests {
		if got := table.lasts(&tt.result); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if New(-1, 0.01, time.Now) != nil {
		t.Error("a negative cap still made a table")
	}
}

// TestDenyLeasesAnswerThenOneAsksForAll: a lease answers its kind, its
// waits shortened by the time since; when it ends, one request asks the
// leader and the others of its kind wait for its answer, which becomes the
// next lease; a clear drops the leases.
func TestDenyLeasesAnswerThenOneAsksForAll(t *testing.T) {
	t.Parallel()
	clock := &fakeNow{t: time.Unix(1000, 0)}
	table := New(time.Second, 0.01, clock.now)
	ctx := context.Background()
	if _, ok, probing := table.Answer(ctx, "k"); ok || probing {
		t.Fatal("an empty table answered, or made a probe")
	}
	sent := clock.now()
	if !table.Settle("k", nil, sent, ptr(denial(time.Hour))) {
		t.Fatal("a denial of an hour took no lease")
	}
	clock.add(300 * time.Millisecond)
	res, ok, _ := table.Answer(ctx, "k")
	if !ok || !res.Leased || int64(res.Checks[0].Decision.RetryAfter) != int64(time.Hour-300*time.Millisecond) {
		t.Fatalf("the lease answered %+v, %v; want the denial, 300ms on", res, ok)
	}
	clock.add(time.Second)
	if _, ok, probing := table.Answer(ctx, "k"); ok || !probing {
		t.Fatalf("after its end the lease answered=%v probing=%v; want the request to ask for its kind", ok, probing)
	}
	answered := make(chan bool)
	go func() {
		_, ok, _ := table.Answer(ctx, "k")
		answered <- ok
	}()
	select {
	case <-answered:
		t.Fatal("a request of the kind did not wait for the one asking")
	case <-time.After(50 * time.Millisecond):
	}
	table.Settle("k", nil, clock.now(), ptr(denial(time.Hour)))
	if !<-answered {
		t.Fatal("the waiting request was not answered from the new lease")
	}
	table.Clear("")
	if _, ok, probing := table.Answer(ctx, "k"); ok || probing {
		t.Fatal("a cleared table answered")
	}
}

func ptr[T any](v T) *T { return &v }

// waitForWaiters polls until n requests wait for the probe of kind key.
func waitForWaiters(table *Table, key string, n int) {
	for {
		table.mu.Lock()
		waiting := table.byKind[key].waiting
		table.mu.Unlock()
		if waiting == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAnAdmissionThatTookTheLastHandsTheAskingOver: when the request asking
// for its kind is admitted with nothing left and the next unit comes later
// than its answer took, one of those waiting asks next (the kind is still
// hot) and the rest keep waiting; admitted with room left, or with the next
// unit sooner than an answer comes back, they all ask.
func TestAnAdmissionThatTookTheLastHandsTheAskingOver(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		remaining   int64
		refill      time.Duration // until the next unit
		trip        time.Duration // from the ask to its answer
		wantProbing bool
	}{
		{"nothing left: the next asks alone", 0, time.Second, 5 * time.Millisecond, true},
		{"room left: every one asks", 5, time.Second, 5 * time.Millisecond, false},
		{"nothing left, but the next unit comes sooner than an answer: every one asks", 0, 10 * time.Millisecond, 20 * time.Millisecond, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := &fakeNow{t: time.Unix(1000, 0)}
			table := New(time.Second, 0.01, clock.now)
			ctx := context.Background()
			table.Settle("k", nil, clock.now(), ptr(denial(10*time.Millisecond)))
			clock.add(time.Second)
			if _, _, probing := table.Answer(ctx, "k"); !probing {
				t.Fatal("the first request after the lease did not ask for its kind")
			}
			got := make(chan bool)
			go func() {
				_, _, probing := table.Answer(ctx, "k")
				got <- probing
			}()
			waitForWaiters(table, "k", 1)
			admitted := fsm.Result{Allowed: true, Checks: []fsm.CheckResult{{Decision: algorithms.Decision{Allowed: true, Remaining: tt.remaining, RefillAfter: tt.refill}}}}
			table.Settle("k", nil, clock.now().Add(-tt.trip), &admitted)
			if probing := <-got; probing != tt.wantProbing {
				t.Fatalf("the waiting request asks for its kind: %v, want %v", probing, tt.wantProbing)
			}
		})
	}
}

// TestAProbesDenialAnswersThoseWaitingBeforeItWasSent: a request that
// began waiting before the probe of its kind was sent takes the probe's
// denial as its answer, at the time the leader decided it, even one too
// short to become a lease; one that began waiting after the probe was sent
// asks the leader itself.
func TestAProbesDenialAnswersThoseWaitingBeforeItWasSent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		sentBefore bool // the probe was sent before the request began waiting
		wantAnswer bool
	}{
		{"waiting before the probe was sent: answered", false, true},
		{"waiting since after it was sent: asks again", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := &fakeNow{t: time.Unix(1000, 0)}
			table := New(time.Second, 0.01, clock.now)
			ctx := context.Background()
			table.Settle("k", nil, clock.now(), ptr(denial(time.Hour)))
			clock.add(2 * time.Second)
			if _, _, probing := table.Answer(ctx, "k"); !probing {
				t.Fatal("the first request after the lease did not ask for its kind")
			}
			sentAt := clock.now().Add(time.Millisecond)
			if tt.sentBefore {
				sentAt = clock.now().Add(-time.Millisecond)
			}
			type answer struct {
				res         fsm.Result
				ok, probing bool
			}
			got := make(chan answer)
			go func() {
				res, ok, probing := table.Answer(ctx, "k")
				got <- answer{res, ok, probing}
			}()
			waitForWaiters(table, "k", 1)
			short := denial(time.Millisecond) // too short for a lease
			short.AtNanos = 42
			if table.Settle("k", nil, sentAt, &short) {
				t.Fatal("a denial of a millisecond became a lease")
			}
			a := <-got
			if a.ok != tt.wantAnswer || a.probing {
				t.Fatalf("answered %v, probing %v; want answered %v, else asking the leader itself", a.ok, a.probing, tt.wantAnswer)
			}
			if tt.wantAnswer && (!a.res.Leased || a.res.Allowed || a.res.AtNanos != 42 || a.res.DenyForNanos != 0) {
				t.Fatalf("answer %+v; want the probe's denial at its time, leased, starting no lease", a.res)
			}
		})
	}
}
