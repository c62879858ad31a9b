package algorithms

import (
	"slices"
	"time"
)

// State is what the cluster stores for one (key, limit) pair. Its fields
// mean different things for different algorithms; each algorithm's file
// documents its use, and the zero State always means "no state".
//
//	token_bucket, leaky_bucket, gcra:  At + Frac/rate is the theoretical
//	                                   arrival time (the instant the bucket
//	                                   is full, or empty for the leaky
//	                                   bucket, again); 0 ≤ Frac < rate.
//	fixed_window:                      At is the start of the current window,
//	                                   Count the cost admitted in it.
//	sliding_window_counter:            as fixed_window, plus Previous, the
//	                                   cost admitted in the window before.
//	sliding_window_log:                Log holds one timestamp per unit of
//	                                   cost admitted in the last period,
//	                                   oldest first (a share's units are
//	                                   stamped with its end, see Grant).
//
// Shares are the key's outstanding shares (see Grant), by end.
type State struct {
	At       int64
	Frac     int64
	Count    int64
	Previous int64
	Log      []int64
	Shares   []Share
}

// rule is one algorithm, split into the questions Decide asks of it. Every
// method is pure; admit must not write to memory that s refers to.
type rule interface {
	// wait is 0 if cost can be admitted at now, else the time until it
	// could be, rounded up to the nanosecond. cost ≤ the limit's capacity.
	wait(l Limit, s State, now, cost int64) int64
	// admit returns the state after admitting cost at now (wait was 0).
	admit(l Limit, s State, now, cost int64) State
	// remaining is what could be admitted at now, rounded down.
	remaining(l Limit, s State, now int64) int64
	// expiresAt is the first instant from which s is equivalent to no
	// state (the limit fully available again). It depends on the state
	// alone, so every replica, restored from a snapshot or not, computes the
	// same value.
	expiresAt(l Limit, s State) int64
	// valid reports whether s is a state the rule can produce for l; used
	// to reject corrupt snapshots.
	valid(l Limit, s State) bool

	// What settles an up-front charge, and shares (Charge, Refund, Grant,
	// GiveBack, Restart), each on a state settled at now (see settle):
	//
	// charge takes up to units more, into up to debt units beyond empty
	// where the rule keeps debt, and returns the state and the units
	// charged, 0 when none could be.
	charge(l Limit, s State, now, units, debt int64) (State, int64)
	// refund gives back up to units (at most r's) of what the up-front
	// charge r took, and returns the state and the units given back, 0
	// when nothing could be.
	refund(l Limit, s State, now int64, r UpfrontCharge, units int64) (State, int64)
	// shareEnd is when a share granted at now, asked to last until, ends.
	shareEnd(l Limit, now, until int64) int64
	// grant charges a share of units granted at now, ending at until (its
	// shareEnd), which wait admits.
	grant(l Limit, s State, now, units, until int64) State
	// giveBack returns unspent units (at most its own) of the live share sh.
	giveBack(l Limit, s State, sh Share, unspent int64) State
	// restart is the state that counts nothing but the units of s's live
	// shares, at now.
	restart(l Limit, s State, now int64) State
}

var rules = [...]rule{
	TokenBucket:          tokenBucket{},
	LeakyBucket:          leakyBucket{},
	GCRA:                 gcra{},
	FixedWindow:          fixedWindow{},
	SlidingWindowLog:     slidingWindowLog{},
	SlidingWindowCounter: slidingWindowCounter{},
}

// Decide checks cost against the limit at time now and returns the decision
// and the key's next state. The limit must have passed Validate and the cost
// ValidateCost; the state must be one Decide (or Reserve) returned for the
// same limit, or the zero State.
//
// A denied request, and a request of cost 0, return s unchanged: only an
// admission changes state. Decide never modifies memory that s refers to.
// A state with shares is decided as settled at now (see Grant): the shares
// that ended are dropped from the state an admission returns.
func Decide(l Limit, s State, nowNanos, cost int64) (Decision, State) {
	return Reserve(l, s, nowNanos, cost, 0)
}

// Reserve is Decide that may admit by reservation: with a bucket algorithm
// and maxWait > 0, a cost that Decide would admit within maxWait
// is admitted now (it is consumed now, putting the bucket in debt), and the
// decision's Wait is the exact time the caller must wait before going
// on: as nginx's limit_req without nodelay and x/time/rate's Reserve. The
// debt never exceeds maxWait worth of the rate beyond an empty bucket,
// so the backlog is bounded by construction; while in debt, Remaining is 0.
// For the window algorithms, and with maxWait 0, it is Decide.
// maxWait must be from 0 to MaxWait.
func Reserve(l Limit, s State, nowNanos, cost int64, maxWait time.Duration) (Decision, State) {
	r := rules[l.Algorithm]
	d := Decision{Limit: l.Capacity()}
	given := s
	s = settle(l, s, nowNanos)
	next := s
	switch wait := r.wait(l, s, nowNanos, cost); {
	case wait > 0 && (wait > int64(maxWait) || !l.Algorithm.IsBucket()):
		d.RetryAfter = time.Duration(wait)
	default:
		d.Allowed, d.Wait = true, time.Duration(wait)
		if cost > 0 {
			next = r.admit(l, s, nowNanos, cost)
			next.Shares = s.Shares
		}
	}
	d.Remaining = r.remaining(l, next, nowNanos)
	d.ResetAfter = time.Duration(max(l.ExpiresAtNanos(next)-nowNanos, 0))
	if d.Remaining < d.Limit {
		d.RefillAfter = time.Duration(r.wait(l, next, nowNanos, d.Remaining+1))
	}
	if !d.Allowed || cost == 0 {
		return d, given
	}
	return d, next
}

// ExpiresAtNanos is the first instant from which s is equivalent to no state
// at all under l, so the caller may delete it without changing any future
// decision. It depends on s alone. Time must not run backwards for this to
// hold; the FSM ensures it.
func (l Limit) ExpiresAtNanos(s State) int64 {
	return sharesExpireAt(l, s, rules[l.Algorithm].expiresAt(l, s))
}

// ValidState reports whether s could have been produced by Decide under l.
// A restored snapshot is checked with it.
func (l Limit) ValidState(s State) bool {
	return rules[l.Algorithm].valid(l, s) && validShares(l, s)
}

// Equal reports whether two states are the same.
func (s State) Equal(o State) bool {
	return s.At == o.At && s.Frac == o.Frac && s.Count == o.Count && s.Previous == o.Previous &&
		slices.Equal(s.Log, o.Log) && slices.Equal(s.Shares, o.Shares)
}

// Convert carries a key's usage over from one limit to another, for a
// policy whose limit changed: what the key has used of the old limit at now
// (its capacity minus what remains, so a partly used unit counts as used)
// counts as used of the new one, as if taken at now, up to the new capacity.
// An unused key converts to no state. The result is a state of the new
// limit; the old limit's timing (when each unit was taken) is not kept, so a
// window algorithm holds the carried usage for a whole new period.
//
// s must hold no live shares at now (SharesLive): their holders spend
// them under the limit they were granted under, so a key keeps that limit
// until they end.
//
// Reservation debt beyond an empty bucket (see Reserve) carries over too,
// as time, up to MaxWait: the reservations already granted still run, so
// a bucket they emptied stays empty as long under the new limit.
func Convert(from Limit, s State, to Limit, nowNanos int64) State {
	s = settle(from, s, nowNanos)
	used := from.Capacity() - rules[from.Algorithm].remaining(from, s, nowNanos)
	if used <= 0 {
		return State{}
	}
	_, next := Decide(to, State{}, nowNanos, min(used, to.Capacity()))
	if from.Algorithm.IsBucket() && to.Algorithm.IsBucket() {
		debt := debtAt(s, nowNanos, from).sub(emissionSpan(from.Burst, from), from.Rate)
		if debt.nanos > 0 || (debt.nanos == 0 && debt.frac > 0) {
			next.At += min(debt.ceilNanos(), int64(MaxWait))
		}
	}
	return next
}
