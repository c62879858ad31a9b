package algorithms

import "math/bits"

// The three bucket algorithms (token bucket, leaky bucket as a meter, GCRA)
// are three descriptions of one rule, and decide identically for the same
// rate, period and burst: a proof of that is the property test
// TestBucketAlgorithmsAgree. All three keep one number per key, the
// theoretical arrival time (TAT), kept exactly as At + Frac/rate ns:
//
//	T = period / rate      the time one unit takes to refill (or drain)
//	τ = burst × T          the time the whole bucket takes
//
// They differ in how they phrase the decision, which is what a reader
// recognises, and in nothing a caller can observe.

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

// ceilNanos rounds up to whole nanoseconds.
func (a instant) ceilNanos() int64 {
	if a.frac > 0 {
		return a.nanos + 1
	}
	return a.nanos
}

// emissionSpan returns units × period / rate exactly. Validate guarantees
// the quotient fits for any units ≤ burst + 1.
func emissionSpan(units int64, l Limit) instant {
	hi, lo := bits.Mul64(uint64(units), uint64(l.Period))
	q, r := bits.Div64(hi, lo, uint64(l.Rate))
	return instant{int64(q), int64(r)}
}

// unitsIn returns ⌊span × rate / period⌋: the whole units that refill (or
// drain) in span.
func unitsIn(span instant, l Limit) int64 {
	hi, lo := bits.Mul64(uint64(span.nanos), uint64(l.Rate))
	lo, carry := bits.Add64(lo, uint64(span.frac), 0)
	hi += carry
	q, _ := bits.Div64(hi, lo, uint64(l.Period))
	return int64(q)
}

func tatOf(s State) instant { return instant{s.At, s.Frac} }

func bucketState(t instant) State { return State{At: t.nanos, Frac: t.frac} }

// debtAt is how far the TAT lies ahead of now (zero if behind): the time the
// bucket needs to be full again.
func debtAt(s State, now int64, l Limit) instant {
	d := tatOf(s).sub(instant{nanos: now}, l.Rate)
	if d.nanos < 0 {
		return instant{}
	}
	return d
}

// spare is what the bucket can still take at now, as a span of refill
// time: τ minus the debt, and nothing while a reservation keeps the debt
// beyond τ.
func spare(l Limit, s State, now int64) instant {
	left := emissionSpan(l.Burst, l).sub(debtAt(s, now, l), l.Rate)
	if left.nanos < 0 {
		return instant{}
	}
	return left
}

// bucketExpiresAt is the TAT rounded up: from then on the bucket is full.
func bucketExpiresAt(s State) int64 { return tatOf(s).ceilNanos() }

func bucketValid(l Limit, s State) bool {
	return s.Frac >= 0 && s.Frac < l.Rate && s.Count == 0 && s.Previous == 0 && s.Log == nil
}

// tokenBucket: a bucket holds up to burst tokens and refills continuously
// at rate tokens per period; a request takes cost tokens, and is denied when
// there are fewer. The tokens are not stored: they are derived from the TAT,
// the instant at which the bucket will be full again:
//
//	tokens(now) = burst − max(TAT − now, 0) / T
//	allowed     ⇔ tokens(now) ≥ cost  ⇔  max(TAT, now) + cost×T − now ≤ τ
//	then TAT'   = max(TAT, now) + cost×T
//
// A key with no state, or untouched since its TAT, is a full bucket: burst
// requests are admitted at once, then one every T. Pick it for APIs: it
// allows the bursts real clients make while holding the average to rate.
type tokenBucket struct{ bucketGiveBacks }

func (tokenBucket) wait(l Limit, s State, now, cost int64) int64 {
	// The request needs debt + cost×T ≤ τ; debt shrinks by one ns per ns.
	over := debtAt(s, now, l).add(emissionSpan(cost, l), l.Rate).sub(emissionSpan(l.Burst, l), l.Rate)
	if over.nanos < 0 || (over.nanos == 0 && over.frac == 0) {
		return 0
	}
	return over.ceilNanos()
}

func (tokenBucket) admit(l Limit, s State, now, cost int64) State {
	base := tatOf(s)
	if base.less(instant{nanos: now}) {
		base = instant{nanos: now}
	}
	return bucketState(base.add(emissionSpan(cost, l), l.Rate))
}

func (tokenBucket) remaining(l Limit, s State, now int64) int64 {
	return unitsIn(spare(l, s, now), l)
}

func (tokenBucket) expiresAt(_ Limit, s State) int64 { return bucketExpiresAt(s) }
func (tokenBucket) valid(l Limit, s State) bool      { return bucketValid(l, s) }

// leakyBucket is the leaky bucket as a meter (decide at once, never queue):
// a bucket of capacity burst leaks at rate units per period; a request pours
// in cost units and is admitted only if they fit without overflowing. The
// level is derived from the instant the bucket will be empty (its TAT):
//
//	level(now) = max(E − now, 0) / T
//	allowed    ⇔ level(now) + cost ≤ burst
//	then E'    = max(E, now) + cost×T
//
// How it differs from the token bucket: only in the picture. The level is
// burst minus the token bucket's tokens, so for the same rate, period and
// burst every decision is the same (the meter form is the token bucket seen
// from the other side). What is usually meant by the leaky bucket's smoothing is
// its queue form, where excess requests wait to drain at a steady pace; a
// rate limiter that answers at once cannot queue, so to smooth with this
// algorithm give it a small burst (burst 1 spaces requests T apart).
type leakyBucket struct{ bucketGiveBacks }

// level returns the bucket's level at now as an exact span of drain time.
func (leakyBucket) level(l Limit, s State, now int64) instant { return debtAt(s, now, l) }

func (b leakyBucket) wait(l Limit, s State, now, cost int64) int64 {
	after := b.level(l, s, now).add(emissionSpan(cost, l), l.Rate)
	capacity := emissionSpan(l.Burst, l)
	if !capacity.less(after) {
		return 0
	}
	// The level drains one ns of drain time per ns.
	return after.sub(capacity, l.Rate).ceilNanos()
}

func (b leakyBucket) admit(l Limit, s State, now, cost int64) State {
	return bucketState(instant{nanos: now}.add(b.level(l, s, now), l.Rate).add(emissionSpan(cost, l), l.Rate))
}

func (leakyBucket) remaining(l Limit, s State, now int64) int64 {
	return unitsIn(spare(l, s, now), l)
}

func (leakyBucket) expiresAt(_ Limit, s State) int64 { return bucketExpiresAt(s) }
func (leakyBucket) valid(l Limit, s State) bool      { return bucketValid(l, s) }

// gcra is the Generic Cell Rate Algorithm in the form redis-cell and
// redis_rate use: each key keeps only its TAT; a request of cost n is
// allowed once
//
//	now ≥ allowAt,   allowAt = max(TAT, now) + n×T − τ
//
// and then TAT' = max(TAT, now) + n×T. With τ = burst×T it admits burst
// requests at once (not burst+1 as the ATM form with τ = (burst−1)×T plus
// the request itself would describe it differently but count the same).
// It is the cheapest exact limiter: one integer per key and no refill loop.
type gcra struct{ bucketGiveBacks }

func (gcra) allowAt(l Limit, s State, now, cost int64) (newTAT, allowAt instant) {
	base := tatOf(s)
	if base.less(instant{nanos: now}) {
		base = instant{nanos: now}
	}
	newTAT = base.add(emissionSpan(cost, l), l.Rate)
	return newTAT, newTAT.sub(emissionSpan(l.Burst, l), l.Rate)
}

func (g gcra) wait(l Limit, s State, now, cost int64) int64 {
	_, allowAt := g.allowAt(l, s, now, cost)
	if !(instant{nanos: now}).less(allowAt) {
		return 0
	}
	return allowAt.sub(instant{nanos: now}, l.Rate).ceilNanos()
}

func (g gcra) admit(l Limit, s State, now, cost int64) State {
	newTAT, _ := g.allowAt(l, s, now, cost)
	return bucketState(newTAT)
}

func (gcra) remaining(l Limit, s State, now int64) int64 {
	// A request of cost n fits while n×T ≤ τ − (TAT − now).
	return unitsIn(spare(l, s, now), l)
}

func (gcra) expiresAt(_ Limit, s State) int64 { return bucketExpiresAt(s) }
func (gcra) valid(l Limit, s State) bool      { return bucketValid(l, s) }

// bucketGiveBacks is what the three buckets share of refunds and shares:
// each moves the TAT, and a share is charged as an admission.
type bucketGiveBacks struct{}

func (bucketGiveBacks) refund(l Limit, s State, now int64, r UpfrontCharge, units int64) (State, int64) {
	end := instant{r.TAT, r.TATFrac}
	from := end.sub(emissionSpan(r.Units, l), l.Rate)
	if from.less(instant{nanos: now}) {
		from = instant{nanos: now}
	}
	if !from.less(end) {
		return s, 0 // its units have all refilled
	}
	units = min(units, unitsIn(end.sub(from, l.Rate), l))
	tat := tatOf(s)
	floor := instant{nanos: now}.add(emissionSpan(outstanding(s.Shares), l), l.Rate)
	if units <= 0 || !floor.less(tat) {
		return s, 0
	}
	back := tat.sub(emissionSpan(units, l), l.Rate)
	if back.less(floor) {
		back = floor
	}
	next := s
	next.At, next.Frac = back.nanos, back.frac
	return next, min(units, unitsInCeil(tat.sub(back, l.Rate), l))
}

func (bucketGiveBacks) charge(l Limit, s State, now, units, debt int64) (State, int64) {
	base := tatOf(s)
	if base.less(instant{nanos: now}) {
		base = instant{nanos: now}
	}
	most := instant{nanos: now}.add(emissionSpan(l.Burst+debt, l), l.Rate)
	if !base.less(most) {
		return s, 0
	}
	charged := min(units, unitsIn(most.sub(base, l.Rate), l))
	return bucketState(base.add(emissionSpan(charged, l), l.Rate)), charged
}

func (bucketGiveBacks) shareEnd(_ Limit, _, until int64) int64 { return until }

// giveBack: settled, the TAT is at least now + (all outstanding)×T, so it
// stays at least now + (the rest)×T.
func (bucketGiveBacks) giveBack(l Limit, s State, _ Share, unspent int64) State {
	return bucketState(tatOf(s).sub(emissionSpan(unspent, l), l.Rate))
}

func (bucketGiveBacks) restart(l Limit, s State, now int64) State {
	return bucketState(instant{nanos: now}.add(emissionSpan(outstanding(s.Shares), l), l.Rate))
}

func (b tokenBucket) grant(l Limit, s State, now, units, _ int64) State {
	return b.admit(l, s, now, units)
}
func (b leakyBucket) grant(l Limit, s State, now, units, _ int64) State {
	return b.admit(l, s, now, units)
}
func (g gcra) grant(l Limit, s State, now, units, _ int64) State { return g.admit(l, s, now, units) }
