package algorithms

// Settling an up-front charge: a caller that does not know its cost up front is
// charged the most it may cost when it is admitted, and settles later with
// what it used. Refund gives the difference back, Charge takes an excess.
//
//	buckets (all three)   a refund moves the TAT back by units×T, for no
//	                      more units than the up-front charge's are still
//	                      ahead of now (its units are the last ones of the
//	                      TAT it left, [TAT − reserved×T, TAT]: those behind
//	                      now have refilled, and are not its to give), and
//	                      never below now plus the outstanding shares'
//	                      units×T: the bucket refills to at most full (burst
//	                      less what shares hold). A charge moves it ahead by units×T
//	                      from max(TAT, now), at most to now + τ + debt×T:
//	                      up to debt units beyond empty, which later requests
//	                      wait out as they do a reservation's (max_wait).
//	fixed_window          a refund takes units off the count only while the
//	                      window it was charged in is the current one; a
//	                      charge adds to the current count up to the rate.
//	sliding_window_counter a refund takes units off the window it was
//	                      charged in, current or previous; a charge as the
//	                      fixed window's.
//	sliding_window_log    a refund removes up to units of the stamps at the
//	                      instant it was charged (only those still count); a
//	                      charge stamps units at now, up to the rate.
//
// Neither ever admits more than the limit allows for the units finally
// charged, plus the debt bound: a refund gives back only what the
// up-front charge took from the same bucket or window, and a charge is bounded
// as an admission would be, debt aside. The windows take no debt.

// UpfrontCharge is what an admission to be settled took from a limit: when,
// how many units, and the state it left (for the buckets, the TAT its
// units end at).
type UpfrontCharge struct {
	AtNanos, Units int64
	TAT, TATFrac   int64
}

// ChargedUpfront records the admission of units at now that left the state
// after, for a later Refund.
func ChargedUpfront(l Limit, after State, now, units int64) UpfrontCharge {
	r := UpfrontCharge{AtNanos: now, Units: units}
	if l.Algorithm.IsBucket() {
		r.TAT, r.TATFrac = after.At, after.Frac
	}
	return r
}

// Refund gives back, at now, up to units (at most the charge's) that the
// up-front charge r took and did not use. It returns the new state and the
// units given back: for the buckets, no more than the charge's units
// still ahead of now, and the whole units the TAT moved back by; nothing
// once the bucket is full or the window has passed. Refund never writes to
// memory s refers to.
func Refund(l Limit, s State, now int64, r UpfrontCharge, units int64) (State, int64) {
	s = settle(l, s, now)
	units = min(units, r.Units)
	if units <= 0 {
		return s, 0
	}
	next, given := rules[l.Algorithm].refund(l, s, now, r, units)
	if given <= 0 {
		return s, 0
	}
	return next, given
}

// outstandingIn is the units the state's live shares hold in its window:
// a window's count holds them, and a refund must leave them there.
func outstandingIn(s State) int64 { return outstanding(s.Shares) }

// unitsInCeil is the units span amounts to, rounded up: a TAT that moved
// back by part of a unit gave that unit back in part.
func unitsInCeil(span instant, l Limit) int64 {
	n := unitsIn(span, l)
	if emissionSpan(n, l).less(span) {
		n++
	}
	return n
}

// Charge takes units more at now from a limit that admitted an up-front charge,
// however much is left, up to debt units beyond empty for the buckets (0 to
// the limit's capacity), and up to the rate for the windows, which take no
// debt. It returns the new state and the units charged; what was over the
// bound is not. Charge never writes to memory s refers to.
func Charge(l Limit, s State, now, units, debt int64) (State, int64) {
	s = settle(l, s, now)
	if units <= 0 {
		return s, 0
	}
	next, charged := rules[l.Algorithm].charge(l, s, now, units, debt)
	if charged <= 0 {
		return s, 0
	}
	next.Shares = s.Shares
	return next, charged
}

// chargeWithin is a window's charge: what r can admit at now, no debt.
func chargeWithin(r rule, l Limit, s State, now, units int64) (State, int64) {
	charged := min(units, r.remaining(l, s, now))
	if charged <= 0 {
		return s, 0
	}
	return r.admit(l, s, now, charged), charged
}
