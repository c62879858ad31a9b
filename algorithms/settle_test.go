package algorithms

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// reservation is one reserve-then-settle as the sequential model sees it.
type reservation struct {
	UpfrontCharge
	at, reserved int64
}

// settleRun is one simulated key: reservations admitted at their full
// cost, settled later with less (a refund) or more (a charge, with debt),
// or never (charged in full), besides plain admissions.
type settleRun struct {
	l        Limit
	debt     int64
	now      int64
	state    State
	open     []*reservation
	admitted []admission // what counts: each reservation's final cost at its time, and each charge at its own
}

// simulateSettles runs random actions on one key and returns the first way
// settling broke a rule: more admitted over some interval than the limit
// allows for the final costs plus the debt bound, a refund that raised the
// limit above full or counted in another window, a state Validate refuses.
func simulateSettles(t *rapid.T) error {
	periods := []int64{int64(10 * time.Millisecond), int64(time.Second), int64(time.Minute)}
	r := &settleRun{l: Limit{Algorithm: Algorithm(rapid.IntRange(0, len(algorithmNames)-1).Draw(t, "algorithm")),
		Rate: rapid.Int64Range(1, 30).Draw(t, "rate"), Period: time.Duration(periods[rapid.IntRange(0, 2).Draw(t, "period")])}}
	if r.l.Algorithm.IsBucket() {
		r.l.Burst = rapid.Int64Range(1, 2*r.l.Rate).Draw(t, "burst")
		r.debt = rapid.Int64Range(0, r.l.Burst).Draw(t, "debt")
	}
	r.now = rapid.Int64Range(0, 1e15).Draw(t, "start")
	for range rapid.IntRange(1, 80).Draw(t, "steps") {
		r.now += rapid.Int64Range(0, int64(r.l.Period)/2).Draw(t, "gap")
		if err := r.step(t); err != nil {
			return fmt.Errorf("%v (debt %d) at %d: %w", r.l, r.debt, r.now, err)
		}
		if !r.l.ValidState(r.state) {
			return fmt.Errorf("%v at %d: state %+v is not valid", r.l, r.now, r.state)
		}
	}
	bounded := r.l
	bounded.Burst += r.debt // the debt a charge may take beyond empty
	return withinLimit(bounded, r.admitted)
}

func (r *settleRun) step(t *rapid.T) error {
	capacity := r.l.Capacity()
	switch rapid.IntRange(0, 2).Draw(t, "action") {
	case 0: // an admission, a reservation or not
		cost := rapid.Int64Range(0, capacity).Draw(t, "cost")
		d, next := Decide(r.l, r.state, r.now, cost)
		if !d.Allowed || cost == 0 {
			return nil
		}
		r.state = next
		if rapid.Bool().Draw(t, "reserve") {
			r.open = append(r.open, &reservation{UpfrontCharge: ChargedUpfront(r.l, next, r.now, cost), at: r.now, reserved: cost})
			return nil
		}
		r.admitted = append(r.admitted, admission{r.now, cost})
	case 1: // a settlement: used is less, as much, or more
		if len(r.open) == 0 {
			return nil
		}
		i := rapid.IntRange(0, len(r.open)-1).Draw(t, "which")
		res := r.open[i]
		r.open = append(r.open[:i], r.open[i+1:]...)
		used := rapid.Int64Range(0, 2*res.reserved).Draw(t, "used")
		switch {
		case used < res.reserved:
			before, _ := Decide(r.l, r.state, r.now, 0)
			next, given := Refund(r.l, r.state, r.now, res.UpfrontCharge, res.reserved-used)
			after, _ := Decide(r.l, next, r.now, 0)
			if given < 0 || given > res.reserved-used || after.Remaining > capacity || after.Remaining < before.Remaining {
				return fmt.Errorf("a refund of %d gave %d back: %d left before, %d after", res.reserved-used, given, before.Remaining, after.Remaining)
			}
			if given > 0 && r.chargedElsewhere(res.at) {
				return fmt.Errorf("a refund counted in a window the reservation was not charged in")
			}
			r.state = next
			// The units given back leave the reservation's charge; those
			// the limit had refilled meanwhile were its to keep.
			r.admitted = append(r.admitted, admission{res.at, res.reserved - given})
		case used > res.reserved:
			next, charged := Charge(r.l, r.state, r.now, used-res.reserved, r.debt)
			if charged < 0 || charged > used-res.reserved {
				return fmt.Errorf("a charge of %d took %d", used-res.reserved, charged)
			}
			r.state = next
			r.admitted = append(r.admitted, admission{res.at, res.reserved}, admission{r.now, charged})
		default:
			r.admitted = append(r.admitted, admission{res.at, res.reserved})
		}
	case 2: // a reservation never settled: charged in full
		if len(r.open) > 0 {
			res := r.open[0]
			r.open = r.open[1:]
			r.admitted = append(r.admitted, admission{res.at, res.reserved})
		}
	}
	return nil
}

// chargedElsewhere reports whether a window algorithm's current window (as
// the state holds it) is not the one a reservation at `at` counted in.
func (r *settleRun) chargedElsewhere(at int64) bool {
	switch r.l.Algorithm {
	case FixedWindow:
		return windowStart(at, int64(r.l.Period)) != windowStart(r.now, int64(r.l.Period))
	case SlidingWindowCounter:
		return windowStart(at, int64(r.l.Period)) < windowStart(r.now, int64(r.l.Period))-int64(r.l.Period)
	case SlidingWindowLog:
		return at <= r.now-int64(r.l.Period)
	}
	return false
}

// TestSettlingNeverAdmitsMoreThanTheFinalCostsAllow is reserve-then-settle's
// proof by property against a sequential model: whatever callers reserve,
// use and settle, and whichever reservations are never settled, what the
// key admits over every interval is at most what the limit allows for the
// final costs (each at its reservation's time, an excess at its
// settlement's) plus the debt bound; a refund never raises the limit above
// full, and a window's only counts in the window it was charged in.
func TestSettlingNeverAdmitsMoreThanTheFinalCostsAllow(t *testing.T) {
	t.Parallel()
	// Twenty rounds of rapid's hundred runs, a fraction of a second: a
	// refund in the wrong window needs a reservation, an admission in a
	// later window and then the settlement, which one round rarely draws.
	for range 20 {
		rapid.Check(t, func(t *rapid.T) {
			if err := simulateSettles(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRefundsAndCharges(t *testing.T) {
	t.Parallel()
	sec := int64(time.Second)
	t0 := int64(1_800_000_000) * sec
	bucket := Limit{Algorithm: TokenBucket, Rate: 10, Period: time.Duration(sec), Burst: 10}
	window := Limit{Algorithm: FixedWindow, Rate: 10, Period: time.Duration(sec)}
	logged := Limit{Algorithm: SlidingWindowLog, Rate: 10, Period: time.Duration(sec)}
	spend := func(l Limit, at, cost int64) State {
		_, s := Decide(l, State{}, at, cost)
		return s
	}
	reserved := func(l Limit, at, cost int64) UpfrontCharge { return ChargedUpfront(l, spend(l, at, cost), at, cost) }
	tests := []struct {
		name      string
		l         Limit
		s         State
		now, at   int64
		refund    int64
		wantGiven int64
	}{
		{"a bucket gets back what was not used", bucket, spend(bucket, t0, 8), t0, t0, 5, 5},
		{"a bucket refills no further than full", bucket, spend(bucket, t0, 8), t0 + sec/2, t0, 8, 3}, // 5 refilled meanwhile
		{"a full bucket gets nothing", bucket, spend(bucket, t0, 8), t0 + sec, t0, 8, 0},
		{"a window gets back what its window counted", window, spend(window, t0, 8), t0 + sec/2, t0, 5, 5},
		{"the next window gets nothing", window, spend(window, t0, 8), t0 + sec, t0, 5, 0},
		{"a log loses the stamps of the reservation", logged, spend(logged, t0, 8), t0 + sec/2, t0, 5, 5},
		{"a log's stamps that aged out are not given back", logged, spend(logged, t0, 8), t0 + sec, t0, 5, 0},
	}
	for _, tt := range tests {
		next, given := Refund(tt.l, tt.s, tt.now, reserved(tt.l, tt.at, 8), tt.refund)
		if given != tt.wantGiven {
			t.Errorf("%s: gave %d back, want %d", tt.name, given, tt.wantGiven)
		}
		if d, _ := Decide(tt.l, next, tt.now, 0); d.Remaining > tt.l.Capacity() {
			t.Errorf("%s: %d left, over the capacity", tt.name, d.Remaining)
		}
	}
	// A charge takes debt up to its bound, and the next request waits it out.
	next, charged := Charge(bucket, spend(bucket, t0, 10), t0, 8, 5)
	if charged != 5 {
		t.Fatalf("charged %d of 8 with a debt of 5, want 5", charged)
	}
	if d, _ := Decide(bucket, next, t0, 1); d.Allowed || int64(d.RetryAfter) != 6*sec/10 {
		t.Fatalf("after the debt: %+v, want a wait of 6 refills", d)
	}
	if _, charged := Charge(window, spend(window, t0, 8), t0, 5, 5); charged != 2 {
		t.Fatalf("a window charged %d beyond its rate", charged)
	}
}
