package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// sleepyTarget answers every call after delay, and the first call of
// caller 0 after firstDelay instead.
type sleepyTarget struct {
	delay, firstDelay time.Duration
	first             atomic.Bool
}

func (*sleepyTarget) name() string { return "sleepy" }

func (t *sleepyTarget) do(_ context.Context, caller, _ int) (int, error) {
	if caller == 0 && t.first.CompareAndSwap(false, true) {
		time.Sleep(t.firstDelay)
		return 1, nil
	}
	time.Sleep(t.delay)
	return 1, nil
}

// TestOpenLoopSendsOnScheduleBehindASlowCall: while one caller waits
// 600 ms for an answer, the others send the schedule's calls on time, so
// one slow answer is one slow sample, not fifteen. With a slot of its own
// every 40 ms per caller, the waiting caller's next fifteen slots (7% of
// them) would all be late, by up to 600 ms.
func TestOpenLoopSendsOnScheduleBehindASlowCall(t *testing.T) {
	t.Parallel()
	tgt := &sleepyTarget{firstDelay: 600 * time.Millisecond}
	r := measure(context.Background(), tgt, loadPoint{callers: 8, rate: 200}, options{duration: time.Second})
	if r.Mode != "open" || r.Rate != 200 {
		t.Fatalf("mode %q at %v", r.Mode, r.Rate)
	}
	// 200 slots in the second; a loaded machine may add a few at its edges.
	if r.Calls < 190 || r.Calls > 210 || r.Unsent != 0 || r.Errors != 0 {
		t.Fatalf("calls %d, unsent %d, errors %d; want about 200, 0, 0", r.Calls, r.Unsent, r.Errors)
	}
	if r.P99MS >= 300 {
		t.Fatalf("p99 %.1f ms: the calls behind the slow one waited for it", r.P99MS)
	}
	if r.P999MS < 500 {
		t.Fatalf("p999 %.1f ms: the slow call is missing", r.P999MS)
	}
}

// TestOpenLoopCountsWhatItCouldNotSend: one caller answered in 50 ms
// cannot send 100 calls a second; the calls it could not send by the end
// of the drain count as unsent, with the time they waited, so the
// percentiles show the backlog instead of hiding it.
func TestOpenLoopCountsWhatItCouldNotSend(t *testing.T) {
	t.Parallel()
	tgt := &sleepyTarget{delay: 50 * time.Millisecond}
	r := measure(context.Background(), tgt, loadPoint{callers: 1, rate: 100}, options{duration: 300 * time.Millisecond})
	if r.Unsent == 0 || r.Calls < 28 || r.Calls > 32 || r.Decisions+r.Unsent != r.Calls {
		t.Fatalf("calls %d, decisions %d, unsent %d: want about 30 calls, some unsent, each either", r.Calls, r.Decisions, r.Unsent)
	}
	if r.Samples != int(r.Calls) || r.P99MS < 250 {
		t.Fatalf("%d samples of %d calls, p99 %.1f ms: the unsent calls' waits must count", r.Samples, r.Calls, r.P99MS)
	}
}

// TestClosedLoopCallsAgainWhenAnswered: a closed loop has no schedule:
// each caller calls again as soon as it is answered.
func TestClosedLoopCallsAgainWhenAnswered(t *testing.T) {
	t.Parallel()
	tgt := &sleepyTarget{delay: 10 * time.Millisecond}
	r := measure(context.Background(), tgt, loadPoint{callers: 2}, options{duration: 300 * time.Millisecond})
	if r.Mode != "closed" || r.Calls < 20 || r.Calls > 62 || r.Unsent != 0 {
		t.Fatalf("mode %q, calls %d, unsent %d; want closed, about 60, 0", r.Mode, r.Calls, r.Unsent)
	}
}
