package algorithms

import "math/bits"

// State is what the cluster stores for one (key, limit) pair.
//
// For the token bucket it is the bucket's theoretical arrival time (TAT): the
// instant at which the bucket will be full again if nothing more is taken.
// The TAT is TATNanos + TATFrac/Rate nanoseconds since the Unix epoch, with
// 0 ≤ TATFrac < Rate, so fractions of a token are never rounded away.
//
// The zero State means "no state": a full bucket.
type State struct {
	TATNanos int64
	TATFrac  int64
}

// ExpiresAtNanos is the first instant at which the state is equivalent to no
// state at all (the bucket has refilled completely), so the caller may delete
// it without changing any future decision.
func (s State) ExpiresAtNanos() int64 {
	if s.TATFrac > 0 {
		return s.TATNanos + 1
	}
	return s.TATNanos
}

// instant is an exact point or span of time: nanos + frac/rate nanoseconds,
// with 0 ≤ frac < rate. The rate is the limit's; it is not stored.
type instant struct {
	nanos int64
	frac  int64
}

func (a instant) less(b instant) bool {
	return a.nanos < b.nanos || (a.nanos == b.nanos && a.frac < b.frac)
}

func (a instant) add(b instant, rate int64) instant {
	s := instant{a.nanos + b.nanos, a.frac + b.frac}
	if s.frac >= rate {
		s.nanos++
		s.frac -= rate
	}
	return s
}

func (a instant) sub(b instant, rate int64) instant {
	d := instant{a.nanos - b.nanos, a.frac - b.frac}
	if d.frac < 0 {
		d.nanos--
		d.frac += rate
	}
	return d
}

// ceilNanos rounds a span up to whole nanoseconds.
func (a instant) ceilNanos() int64 {
	if a.frac > 0 {
		return a.nanos + 1
	}
	return a.nanos
}

// emissionSpan returns units × period / rate exactly: the time the bucket
// takes to refill that many units. Validate guarantees the quotient fits for
// any units ≤ burst + 1.
func emissionSpan(units int64, l Limit) instant {
	hi, lo := bits.Mul64(uint64(units), uint64(l.PeriodNanos))
	q, r := bits.Div64(hi, lo, uint64(l.Rate))
	return instant{int64(q), int64(r)}
}

// unitsIn returns how many whole units refill in the span: ⌊span × rate / period⌋.
func unitsIn(span instant, l Limit) int64 {
	hi, lo := bits.Mul64(uint64(span.nanos), uint64(l.Rate))
	lo, carry := bits.Add64(lo, uint64(span.frac), 0)
	hi += carry
	q, _ := bits.Div64(hi, lo, uint64(l.PeriodNanos))
	return int64(q)
}

// Decide checks cost against the limit at time now and returns the decision
// and the key's next state. The limit must have passed Validate and the cost
// ValidateCost; the state must be one that Decide returned for the same limit
// (or the zero State).
//
// The token bucket is computed in its "theoretical arrival time" form, which
// decides exactly like a bucket of Burst tokens refilled continuously at
// Rate tokens per period:
//
//	T    = period / rate                 (time to refill one token)
//	τ    = burst × T                     (time to refill the whole bucket)
//	base = max(TAT, now)
//	TAT' = base + cost × T
//	allowed  ⇔  TAT' − now ≤ τ           (enough tokens: burst − (TAT'−now)/T ≥ 0)
//	tokens left = (τ − (TAT−now)) / T    (rounded down)
//
// A bucket untouched since TAT is full; so is a key with no state. Starting
// full, exactly Burst requests of cost 1 are admitted at once, and from then
// on one more every T. Because the TAT only moves forward when a request is
// admitted, a denied request changes nothing, and cost 0 never consumes.
func Decide(l Limit, s State, nowNanos, cost int64) (Decision, State) {
	now := instant{nanos: nowNanos}
	tat := instant{s.TATNanos, s.TATFrac}
	base := tat
	if base.less(now) {
		base = now
	}
	tau := emissionSpan(l.Burst, l)
	newTAT := base.add(emissionSpan(cost, l), l.Rate)
	debt := newTAT.sub(now, l.Rate)

	d := Decision{Limit: l.Burst}
	next := s
	if !tau.less(debt) {
		d.Allowed = true
		if cost > 0 {
			next = State{newTAT.nanos, newTAT.frac}
		}
	} else {
		// The request fits once debt has shrunk to τ, i.e. after debt − τ.
		d.RetryAfterNanos = debt.sub(tau, l.Rate).ceilNanos()
		debt = base.sub(now, l.Rate)
	}
	d.ResetAfterNanos = debt.ceilNanos()
	available := tau.sub(debt, l.Rate)
	d.Remaining = unitsIn(available, l)
	if d.Remaining < l.Burst {
		d.RefillAfterNanos = emissionSpan(d.Remaining+1, l).sub(available, l.Rate).ceilNanos()
	}
	return d, next
}
