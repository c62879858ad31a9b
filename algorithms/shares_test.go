package algorithms

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// drawer draws the choices of one simulated run, from rapid (which shrinks
// a failure to a small case) or from a seeded source (which the mutation
// test searches).
type drawer interface {
	draw(lo, hi int64, label string) int64
}

type rapidDrawer struct{ t *rapid.T }

func (d rapidDrawer) draw(lo, hi int64, label string) int64 {
	return rapid.Int64Range(lo, hi).Draw(d.t, label)
}

type seededDrawer struct{ r *rand.Rand }

func (d seededDrawer) draw(lo, hi int64, _ string) int64 { return lo + d.r.Int64N(hi-lo+1) }

// heldShare is a share as its holder sees it.
type heldShare struct {
	Share
	spent int64
	done  bool // given back, or its holder gone
	// faded: the share can no longer weigh on the log. A bucket's share
	// fades when the log's bucket has been full since it ended (before,
	// the units it charged may still be missing from a bucket that never
	// refilled); a window's share once no window that counts it is
	// weighed any more.
	faded bool
}

type admission struct{ at, units int64 }

// shareRun is one simulated key: the state the log keeps, what holders do
// with their shares, and an ideal single caller that sees every unit at the
// moment it was really admitted.
type shareRun struct {
	l        Limit
	now      int64
	state    State // the log's
	ideal    State // one caller's, fed every real admission in order
	held     []*heldShare
	admitted []admission
	nextID   uint64
}

// simulateShares runs random actions on one key and returns the first way
// the shares broke the limit: more admitted than one caller may, less
// admitted than the outstanding shares explain, a state Validate refuses, or
// one that expires while it still matters.
func simulateShares(d drawer) error {
	periods := []int64{int64(10 * time.Millisecond), int64(time.Second), int64(time.Minute)}
	r := &shareRun{l: Limit{Algorithm: Algorithm(d.draw(0, int64(len(algorithmNames)-1), "algorithm")),
		Rate: d.draw(1, 30, "rate"), Period: time.Duration(periods[d.draw(0, 2, "period")])}, nextID: 1}
	if r.l.Algorithm.IsBucket() {
		r.l.Burst = d.draw(1, 2*r.l.Rate, "burst")
	}
	r.now = d.draw(0, 1e15, "start")
	for range d.draw(1, 80, "steps") {
		r.now += d.draw(0, int64(r.l.Period)/2, "gap")
		if err := r.step(d); err != nil {
			return fmt.Errorf("%v at %d: %w", r.l, r.now, err)
		}
		if !r.l.ValidState(r.state) {
			return fmt.Errorf("%v at %d: state %+v is not valid", r.l, r.now, r.state)
		}
	}
	if err := withinLimit(r.l, r.admitted); err != nil {
		return fmt.Errorf("%v: %w", r.l, err)
	}
	return r.expiresOnlyWhenDone()
}

func (r *shareRun) step(d drawer) error {
	capacity := r.l.Capacity()
	r.fade()
	switch d.draw(0, 4, "action") {
	case 0: // a caller asks the log
		cost := d.draw(0, capacity, "cost")
		if err := r.underAdmissionBounded(); err != nil {
			return err
		}
		dec, next := Decide(r.l, r.state, r.now, cost)
		if dec.Allowed {
			r.state = next
			return r.admit(cost)
		}
	case 1: // a holder takes a share
		units, ttl := d.draw(1, capacity, "units"), d.draw(1, 2*int64(r.l.Period), "ttl")
		sh, next, ok := Grant(r.l, r.state, r.now, units, time.Duration(ttl), r.nextID)
		r.nextID++
		if ok {
			if sh.Until <= r.now || sh.Until > r.now+ttl || sh.Units != units {
				return fmt.Errorf("granted %+v for %d units and ttl %d", sh, units, ttl)
			}
			r.state = next
			r.held = append(r.held, &heldShare{Share: sh})
		}
	case 2: // a holder spends from its share, before it ends
		if h := r.pickLive(d); h != nil {
			n := d.draw(0, h.Units-h.spent, "spend")
			h.spent += n
			return r.admit(n)
		}
	case 3: // a holder gives back what it did not spend
		if h := r.pickLive(d); h != nil {
			h.done = true
			r.state, _ = GiveBack(r.l, r.state, r.now, h.ID, h.Units-h.spent)
		}
	case 4: // a holder vanishes with its share
		if h := r.pickLive(d); h != nil {
			h.done = true
		}
	}
	return nil
}

func (r *shareRun) pickLive(d drawer) *heldShare {
	var live []*heldShare
	for _, h := range r.held {
		if !h.done && r.now < h.Until {
			live = append(live, h)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[d.draw(0, int64(len(live)-1), "share")]
}

// admit records a real admission and feeds it to the ideal caller, which
// must be able to admit it too.
func (r *shareRun) admit(units int64) error {
	if units == 0 {
		return nil
	}
	dec, next := Decide(r.l, r.ideal, r.now, units)
	if !dec.Allowed {
		return fmt.Errorf("%d units admitted that one caller could not have been (%d remaining)", units, dec.Remaining)
	}
	r.ideal = next
	r.admitted = append(r.admitted, admission{r.now, units})
	return nil
}

// fade marks the shares that can no longer weigh on the log (see
// heldShare.faded).
func (r *shareRun) fade() {
	fullAt := r.l.ExpiresAtNanos(r.state) // the state says the bucket is full from then on
	for _, h := range r.held {
		switch {
		case r.l.Algorithm.IsBucket():
			h.faded = h.faded || (fullAt <= r.now && h.Until <= fullAt)
		case r.l.Algorithm == SlidingWindowLog:
			h.faded = h.Until+int64(r.l.Period) <= r.now
		default: // the window it was granted in, and for the counter the next
			h.faded = windowStart(h.Until-1, int64(r.l.Period))+2*int64(r.l.Period) <= r.now
		}
	}
}

// underAdmissionBounded: the log may have less to give than the ideal
// caller by no more than the units of the shares that can still weigh on
// it (outstanding, or ended but not yet faded).
func (r *shareRun) underAdmissionBounded() error {
	logDec, _ := Decide(r.l, r.state, r.now, 0)
	idealDec, _ := Decide(r.l, r.ideal, r.now, 0)
	var weighing int64
	for _, h := range r.held {
		if !h.faded {
			weighing += h.Units
		}
	}
	if short := idealDec.Remaining - logDec.Remaining; short > weighing {
		return fmt.Errorf("the log has %d left where one caller has %d: short by more than the %d units of shares", logDec.Remaining, idealDec.Remaining, weighing)
	}
	return nil
}

// expiresOnlyWhenDone: from its expiry on, the state decides as no state.
func (r *shareRun) expiresOnlyWhenDone() error {
	at := r.l.ExpiresAtNanos(r.state)
	if at <= r.now {
		at = r.now
	}
	for _, cost := range []int64{0, 1, r.l.Capacity()} {
		got, _ := Decide(r.l, r.state, at, cost)
		want, _ := Decide(r.l, State{}, at, cost)
		if got != want {
			return fmt.Errorf("%v: at its expiry %d the state %+v decides %+v, no state %+v", r.l, at, r.state, got, want)
		}
	}
	return nil
}

// withinLimit checks real admissions, in time order, against what the
// algorithm admits for one caller over any interval.
func withinLimit(l Limit, adm []admission) error {
	p, rate := int64(l.Period), l.Rate
	sumIn := func(from, to int64) int64 { // admissions with from ≤ at ≤ to
		var n int64
		for _, a := range adm {
			if a.at >= from && a.at <= to {
				n += a.units
			}
		}
		return n
	}
	for _, a := range adm {
		x := a.at
		switch l.Algorithm {
		case TokenBucket, LeakyBucket, GCRA:
			for _, b := range adm {
				if b.at >= x {
					if n := sumIn(x, b.at); n*p > l.Burst*p+(b.at-x)*rate {
						return fmt.Errorf("%d units in [%d, %d], more than burst + rate × %d ns", n, x, b.at, b.at-x)
					}
				}
			}
		case FixedWindow:
			if start := windowStart(x, p); sumIn(start, start+p-1) > rate {
				return fmt.Errorf("%d units in the window from %d", sumIn(start, start+p-1), start)
			}
		case SlidingWindowCounter:
			start := windowStart(x, p)
			previous, current := sumIn(start-p, start-1), sumIn(start, x)
			if previous*(p-(x-start))+current*p > rate*p {
				return fmt.Errorf("at %d, %d previous and %d current units weigh more than the rate", x, previous, current)
			}
		case SlidingWindowLog:
			if n := sumIn(x-p+1, x); n > rate {
				return fmt.Errorf("%d units in the period up to %d", n, x)
			}
		}
	}
	return nil
}

// TestSharesNeverAdmitMoreThanTheLimit is the charging rule's proof by
// property: for every algorithm, whatever holders do with their shares
// (spend at any moment before they end, give back, vanish), what they and
// the log admit together is never more than one caller could have been
// admitted, and the log never has less to give than the shares explain.
func TestSharesNeverAdmitMoreThanTheLimit(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		if err := simulateShares(rapidDrawer{t}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestShareMutationsBreakTheLimit: each way of getting the charging rule
// wrong lets more through than the limit, and the simulation finds it; so
// the property test above can fail.
func TestShareMutationsBreakTheLimit(t *testing.T) {
	tests := []struct {
		name     string
		mutation int
	}{
		{"a bucket refills while its shares are out", mutationNoRefillCap},
		{"a window's share outlives its window", mutationNoWindowEnd},
		{"the log stamps a share with its grant", mutationLogAtGrant},
	}
	defer func() { shareMutation = mutationNone }()
	for _, tt := range tests {
		shareMutation = tt.mutation
		found := false
		for seed := uint64(0); seed < 20_000 && !found; seed++ {
			found = simulateShares(seededDrawer{rand.New(rand.NewPCG(seed, 1))}) != nil
		}
		if !found {
			t.Errorf("%s: no run in 20,000 broke the limit", tt.name)
		}
	}
	shareMutation = mutationNone
	for seed := uint64(0); seed < 2_000; seed++ {
		if err := simulateShares(seededDrawer{rand.New(rand.NewPCG(seed, 1))}); err != nil {
			t.Fatalf("seed %d without a mutation: %v", seed, err)
		}
	}
}

// TestRestartKeepsSharesCharged: a reset key counts nothing but its
// outstanding shares, under every algorithm.
func TestRestartKeepsSharesCharged(t *testing.T) {
	t.Parallel()
	now := int64(time.Hour) * 1000
	for _, alg := range []Algorithm{TokenBucket, LeakyBucket, GCRA, FixedWindow, SlidingWindowCounter, SlidingWindowLog} {
		l := Limit{Algorithm: alg, Rate: 10, Period: time.Minute}
		if alg.IsBucket() {
			l.Burst = 10
		}
		_, s := Decide(l, State{}, now, 6)
		sh, s, ok := Grant(l, s, now, 3, time.Second, 1)
		if !ok {
			t.Fatalf("%s: no share granted", alg)
		}
		restarted := Restart(l, s, now+1)
		if got := rules[alg].remaining(l, settle(l, restarted, now+1), now+1); got != 7 {
			t.Errorf("%s: %d remaining after a restart with a share of 3 out, want 7", alg, got)
		}
		if !slices.Equal(restarted.Shares, []Share{sh}) {
			t.Errorf("%s: shares %v after a restart, want %v", alg, restarted.Shares, sh)
		}
		if got := Restart(l, restarted, sh.Until); !got.Equal(State{}) {
			t.Errorf("%s: a restart after the share ended is %+v, want no state", alg, got)
		}
	}
}
