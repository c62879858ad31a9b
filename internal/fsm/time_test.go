package fsm

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/algorithms"
)

// extremeLimits are the largest limits of every algorithm: the arithmetic
// that must not overflow at the latest time an entry may carry.
var extremeLimits = []algorithms.Limit{
	{Algorithm: algorithms.TokenBucket, Rate: 1, PeriodNanos: int64(algorithms.MaxPeriod), Burst: 50},
	{Algorithm: algorithms.GCRA, Rate: algorithms.MaxRate, PeriodNanos: int64(algorithms.MaxPeriod), Burst: algorithms.MaxBurst},
	{Algorithm: algorithms.LeakyBucket, Rate: 1, PeriodNanos: int64(algorithms.MaxPeriod), Burst: 50},
	{Algorithm: algorithms.FixedWindow, Rate: algorithms.MaxRate, PeriodNanos: int64(algorithms.MaxPeriod)},
	{Algorithm: algorithms.SlidingWindowCounter, Rate: algorithms.MaxRate, PeriodNanos: int64(algorithms.MaxPeriod)},
	{Algorithm: algorithms.SlidingWindowLog, Rate: algorithms.MaxLogRate, PeriodNanos: int64(algorithms.MaxPeriod)},
}

// TestTheLatestTimeStillDecides: entries stamped as a leader stamps them
// (ClampStamp) keep deciding every algorithm at its largest limit up to
// and at MaxNowNanos, where time stops: nothing can make later requests
// fail.
func TestTheLatestTimeStillDecides(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	last := int64(MaxNowNanos) - int64(algorithms.MaxPeriod)
	for step := range 6 {
		stamp := ClampStamp(last+int64(step)*int64(algorithms.MaxPeriod)/2, last)
		for _, l := range extremeLimits {
			for _, r := range a.allow(stamp, one("k", l, 1)) {
				if r.Rejection != nil || r.AtNanos > MaxNowNanos {
					t.Fatalf("%s at %d: %+v", l.Algorithm, stamp, r)
				}
			}
		}
		last = a.fsm.Now()
	}
	if a.fsm.Now() != MaxNowNanos {
		t.Fatalf("cluster time %d, want it stopped at %d", a.fsm.Now(), int64(MaxNowNanos))
	}
}

// TestAnEntryFromTheFarFutureChangesNothing: an entry that would move
// cluster time more than MaxTimeStep at once (forged, or a damaged disk) is
// refused and changes nothing, so it cannot refill every bucket.
func TestAnEntryFromTheFarFutureChangesNothing(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.allow(t0, one("spent", perMinute100, 100))
	_, before := a.fsm.Digest()
	for _, stamp := range []int64{t0 + int64(MaxTimeStep) + 1, 5.9e18, MaxNowNanos, MaxNowNanos + 1} {
		data, err := Encode(CommandAllow, &AllowCommand{NowNanos: stamp, Requests: []Request{one("spent", perMinute100, 1)}})
		if err != nil {
			t.Fatal(err)
		}
		resp := a.fsm.Apply(&raft.Log{Index: 99, Type: raft.LogCommand, Data: data})
		if err, ok := resp.(error); !ok || !errors.Is(err, ErrCorruptCommand) {
			t.Fatalf("an entry stamped %d: %v, want it refused", stamp, resp)
		}
	}
	if _, after := a.fsm.Digest(); after != before {
		t.Fatal("a refused entry changed the state")
	}
	if r := a.allow(t0+int64(time.Millisecond), one("spent", perMinute100, 1))[0]; r.Allowed {
		t.Fatal("the spent key was refilled")
	}
}
