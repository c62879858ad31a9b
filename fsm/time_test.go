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
	{Algorithm: algorithms.TokenBucket, Rate: 1, Period: algorithms.MaxPeriod, Burst: 50},
	{Algorithm: algorithms.GCRA, Rate: algorithms.MaxRate, Period: algorithms.MaxPeriod, Burst: algorithms.MaxBurst},
	{Algorithm: algorithms.LeakyBucket, Rate: 1, Period: algorithms.MaxPeriod, Burst: 50},
	{Algorithm: algorithms.FixedWindow, Rate: algorithms.MaxRate, Period: algorithms.MaxPeriod},
	{Algorithm: algorithms.SlidingWindowCounter, Rate: algorithms.MaxRate, Period: algorithms.MaxPeriod},
	{Algorithm: algorithms.SlidingWindowLog, Rate: algorithms.MaxLogRate, Period: algorithms.MaxPeriod},
}

// TestTheLatestTimeStillDecides: entries stamped as a leader stamps them
// (clamped to StampCeiling, each in a new term as a restarted cluster's
// would be) keep deciding every algorithm at its largest limit up to and at
// MaxNowNanos, where time stops: nothing can make later requests fail.
func TestTheLatestTimeStillDecides(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	last := int64(MaxNowNanos) - int64(algorithms.MaxPeriod)
	a.tick(last)
	for step := range 6 {
		a.term++
		stamp := min(ClampStamp(last+int64(step)*int64(algorithms.MaxPeriod)/2, last), a.fsm.StampCeiling(a.term))
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

// TestLargeStepsTakeATermEach: in one term only its first stamped entry
// may move cluster time by up to MaxTimeStep; the others move it at most
// MaxStepInTerm each, so fourteen entries of just under ten years each, in
// one term, cannot carry it to MaxNowNanos and stop it: all but the first
// are refused. A restore may move time back to its backup's, but not
// forward by more than MaxRestoreAhead.
func TestLargeStepsTakeATermEach(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.allow(t0, one("spent", perMinute100, 100))
	a.term++
	step := int64(MaxTimeStep) - int64(time.Hour)
	refused := 0
	for i := range 14 {
		data, err := Encode(CommandLeaseTick, &LeaseTickCommand{NowNanos: t0 + int64(i+1)*step})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := a.raw(data).(error); ok {
			refused++
		}
	}
	if refused != 13 || a.fsm.Now() != t0+step {
		t.Fatalf("%d of 14 steps refused and time at %d; want 13 refused and time one step on", refused, a.fsm.Now())
	}
	if ceiling := a.fsm.StampCeiling(a.term); ceiling != a.fsm.Now()+int64(MaxStepInTerm) {
		t.Fatalf("the ceiling within the term is %d after %d, want MaxStepInTerm", ceiling-a.fsm.Now(), a.fsm.Now())
	}
	if got := a.fsm.CheckRestoreTime(a.fsm.Now()+int64(MaxRestoreAhead)+1, a.fsm.Now()); got == nil {
		t.Fatal("a backup from beyond MaxRestoreAhead was not refused")
	}
	if got := a.fsm.CheckRestoreTime(t0, a.fsm.Now()); got != nil {
		t.Fatalf("a backup from the past was refused: %v", got)
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
