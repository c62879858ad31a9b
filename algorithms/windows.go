package algorithms

import (
	"math/bits"
	"slices"
)

// windowStart returns the start of the period-long window holding now.
// Windows are aligned to multiples of the period since the Unix epoch, on
// the cluster's clock, not to a key's first request.
func windowStart(now, period int64) int64 {
	start := now - now%period
	if now < 0 && now%period != 0 {
		start -= period
	}
	return start
}

func windowsValid(l Limit, s State) bool {
	return l.Burst == 0 && s.Frac == 0 && s.At%int64(l.Period) == 0 &&
		s.Count >= 0 && s.Count <= l.Rate && s.Previous >= 0 && s.Previous <= l.Rate
}

// fixedWindow counts the cost admitted in the current window and admits
// while the count stays within rate:
//
//	window(now) = ⌊now / period⌋ × period
//	allowed     ⇔ count(window(now)) + cost ≤ rate
//
// It is the cheapest algorithm (one counter per key) and the easiest to
// explain, and it lets up to 2 × rate through around a window edge: rate at
// the end of one window and rate again at the start of the next. Pick it for
// coarse internal quotas (per day, per month), not to protect a fragile
// backend.
type fixedWindow struct{ countedGiveBacks }

// current returns the count of the window holding now.
func (fixedWindow) current(l Limit, s State, now int64) (start, count int64) {
	start = windowStart(now, int64(l.Period))
	if s.At == start {
		return start, s.Count
	}
	return start, 0
}

func (w fixedWindow) wait(l Limit, s State, now, cost int64) int64 {
	start, count := w.current(l, s, now)
	if count+cost <= l.Rate {
		return 0
	}
	return start + int64(l.Period) - now // the next window starts empty
}

func (w fixedWindow) admit(l Limit, s State, now, cost int64) State {
	start, count := w.current(l, s, now)
	return State{At: start, Count: count + cost}
}

func (w fixedWindow) remaining(l Limit, s State, now int64) int64 {
	_, count := w.current(l, s, now)
	return l.Rate - count
}

func (fixedWindow) expiresAt(l Limit, s State) int64 {
	if s.Count == 0 {
		return 0
	}
	return s.At + int64(l.Period)
}

func (fixedWindow) valid(l Limit, s State) bool {
	return windowsValid(l, s) && s.Previous == 0 && s.Log == nil
}

// slidingWindowCounter approximates a sliding window from two fixed-window
// counters, the current one and the one before, weighting the previous by
// how much of it the sliding window still overlaps:
//
//	elapsed   = now − window(now)
//	estimate  = previous × (period − elapsed) / period + current
//	allowed   ⇔ estimate + cost ≤ rate
//
// computed exactly in 128-bit integers: previous × (period − elapsed) +
// (current + cost) × period ≤ rate × period. It assumes the previous
// window's requests were spread evenly, so it can admit a little more than
// rate in some sliding window when they were not (Cloudflare measured
// 0.003% wrong decisions; this repository's accuracy study measures ours),
// for the cost of two integers per key instead of one timestamp per request.
// It is what most edge limiters use by default.
type slidingWindowCounter struct{ countedGiveBacks }

// counts returns the current window's start and the previous and current
// counts as seen from now.
func (slidingWindowCounter) counts(l Limit, s State, now int64) (start, previous, current int64) {
	start = windowStart(now, int64(l.Period))
	switch s.At {
	case start:
		return start, s.Previous, s.Count
	case start - int64(l.Period):
		return start, s.Count, 0
	default:
		return start, 0, 0
	}
}

// weightedPrevious returns previous × (period − elapsed) as 128 bits.
func weightedPrevious(previous, period, elapsed int64) (hi, lo uint64) {
	return bits.Mul64(uint64(previous), uint64(period-elapsed))
}

// fits reports previous×(period−elapsed) + units×period ≤ rate×period.
func (slidingWindowCounter) fits(l Limit, previous, elapsed, units int64) bool {
	ph, pl := weightedPrevious(previous, int64(l.Period), elapsed)
	uh, ul := bits.Mul64(uint64(units), uint64(l.Period))
	lo, carry := bits.Add64(pl, ul, 0)
	hi := ph + uh + carry
	rh, rl := bits.Mul64(uint64(l.Rate), uint64(l.Period))
	return hi < rh || (hi == rh && lo <= rl)
}

// elapsedToFit returns the least elapsed e (within a window) at which
// previous×(period−e) ≤ room×period, with room ≥ 0 and previous > 0:
// e = ⌈period − room×period/previous⌉, at least 0.
func elapsedToFit(period, previous, room int64) int64 {
	if room >= previous {
		return 0
	}
	// period − room×period/previous = (previous−room)×period/previous.
	hi, lo := bits.Mul64(uint64(previous-room), uint64(period))
	q, r := bits.Div64(hi, lo, uint64(previous))
	if r > 0 {
		q++
	}
	return int64(q)
}

func (w slidingWindowCounter) wait(l Limit, s State, now, cost int64) int64 {
	start, previous, current := w.counts(l, s, now)
	elapsed := now - start
	if w.fits(l, previous, elapsed, current+cost) {
		return 0
	}
	if room := l.Rate - current - cost; room >= 0 && previous > 0 {
		// Later in this window the previous count weighs less.
		if e := elapsedToFit(int64(l.Period), previous, room); e < int64(l.Period) {
			return start + e - now
		}
	}
	// In the next window the current count becomes the previous one.
	next := start + int64(l.Period)
	if current == 0 {
		return next - now
	}
	return next + elapsedToFit(int64(l.Period), current, l.Rate-cost) - now
}

func (w slidingWindowCounter) admit(l Limit, s State, now, cost int64) State {
	start, previous, current := w.counts(l, s, now)
	return State{At: start, Previous: previous, Count: current + cost}
}

func (w slidingWindowCounter) remaining(l Limit, s State, now int64) int64 {
	start, previous, current := w.counts(l, s, now)
	// rate − current − ⌈previous × (period − elapsed) / period⌉
	hi, lo := weightedPrevious(previous, int64(l.Period), now-start)
	q, r := bits.Div64(hi, lo, uint64(l.Period))
	if r > 0 {
		q++
	}
	return max(l.Rate-current-int64(q), 0)
}

func (slidingWindowCounter) expiresAt(l Limit, s State) int64 {
	switch {
	case s.Count > 0:
		return s.At + 2*int64(l.Period) // the current count weighs on the next window too
	case s.Previous > 0:
		return s.At + int64(l.Period)
	}
	return 0
}

func (slidingWindowCounter) valid(l Limit, s State) bool { return windowsValid(l, s) && s.Log == nil }

// MaxLogRate is the largest rate sliding_window_log accepts: its state holds
// one timestamp (8 bytes) per unit admitted in the last period, so a key
// can cost up to 80 KB. Above it, use sliding_window_counter.
const MaxLogRate = 10_000

// slidingWindowLog keeps the time of every unit admitted in the last period
// and admits while they number at most rate:
//
//	admitted(now) = #{t in log : t > now − period}
//	allowed       ⇔ admitted(now) + cost ≤ rate
//
// It is exact: no sliding window of length period ever holds more than
// rate. The price is memory, one timestamp per admitted unit, bounded here by
// MaxLogRate. Pick it where the limit must hold to the letter at any instant
// and rates are modest.
type slidingWindowLog struct{}

// live returns the timestamps still inside the window (now − period, now].
func (slidingWindowLog) live(l Limit, s State, now int64) []int64 {
	cutoff := now - int64(l.Period)
	i, _ := slices.BinarySearch(s.Log, cutoff+1)
	return s.Log[i:]
}

func (w slidingWindowLog) wait(l Limit, s State, now, cost int64) int64 {
	live := w.live(l, s, now)
	over := int64(len(live)) + cost - l.Rate
	if over <= 0 {
		return 0
	}
	// The over-th oldest timestamp must leave the window: t leaves at t + period.
	return live[over-1] + int64(l.Period) - now
}

func (w slidingWindowLog) admit(l Limit, s State, now, cost int64) State {
	// Always a new array: the old state may still be read (by a snapshot
	// being written, or when another check of the request denies). In
	// order: a share's stamps may lie ahead of now.
	return State{Log: insertStamps(w.live(l, s, now), now, cost)}
}

func (w slidingWindowLog) remaining(l Limit, s State, now int64) int64 {
	return l.Rate - int64(len(w.live(l, s, now)))
}

func (slidingWindowLog) expiresAt(l Limit, s State) int64 {
	if len(s.Log) == 0 {
		return 0
	}
	return s.Log[len(s.Log)-1] + int64(l.Period)
}

func (slidingWindowLog) valid(l Limit, s State) bool {
	return l.Burst == 0 && s.At == 0 && s.Frac == 0 && s.Count == 0 && s.Previous == 0 &&
		int64(len(s.Log)) <= l.Rate && slices.IsSorted(s.Log)
}

// countedGiveBacks is what the fixed window and the sliding window counter
// share of shares: a share is counted in the window it is granted in, and
// ends with it.
type countedGiveBacks struct{}

func (countedGiveBacks) shareEnd(l Limit, now, until int64) int64 {
	if shareMutation == mutationNoWindowEnd {
		return until
	}
	return min(until, windowStart(now, int64(l.Period))+int64(l.Period))
}

// giveBack: a live share was granted in the window now is in, which is
// the state's.
func (countedGiveBacks) giveBack(_ Limit, s State, _ Share, unspent int64) State {
	s.Count -= unspent
	return s
}

func (countedGiveBacks) restart(l Limit, s State, now int64) State {
	return State{At: windowStart(now, int64(l.Period)), Count: outstanding(s.Shares)}
}

func (w fixedWindow) grant(l Limit, s State, now, units, _ int64) State {
	return w.admit(l, s, now, units)
}
func (w slidingWindowCounter) grant(l Limit, s State, now, units, _ int64) State {
	return w.admit(l, s, now, units)
}

func (w fixedWindow) charge(l Limit, s State, now, units, _ int64) (State, int64) {
	return chargeWithin(w, l, s, now, units)
}

func (w slidingWindowCounter) charge(l Limit, s State, now, units, _ int64) (State, int64) {
	return chargeWithin(w, l, s, now, units)
}

func (w slidingWindowLog) charge(l Limit, s State, now, units, _ int64) (State, int64) {
	return chargeWithin(w, l, s, now, units)
}

func (fixedWindow) refund(l Limit, s State, now int64, r UpfrontCharge, units int64) (State, int64) {
	if current := windowStart(now, int64(l.Period)); s.At != current || windowStart(r.AtNanos, int64(l.Period)) != current {
		return s, 0
	}
	given := min(units, s.Count-outstandingIn(s))
	s.Count -= given
	return s, given
}

func (slidingWindowCounter) refund(l Limit, s State, now int64, r UpfrontCharge, units int64) (State, int64) {
	current, charged := windowStart(now, int64(l.Period)), windowStart(r.AtNanos, int64(l.Period))
	var given int64
	switch {
	case charged == current && s.At == current:
		given = min(units, s.Count-outstandingIn(s))
		s.Count -= given
	case charged == current-int64(l.Period) && s.At == current:
		given = min(units, s.Previous)
		s.Previous -= given
	case charged == current-int64(l.Period) && s.At == charged:
		// The state still holds the charged window as its current one,
		// which from now weighs as the previous.
		given = min(units, s.Count)
		s.Count -= given
	}
	return s, given
}

func (slidingWindowLog) refund(l Limit, s State, now int64, r UpfrontCharge, units int64) (State, int64) {
	if r.AtNanos <= now-int64(l.Period) {
		return s, 0 // its stamps no longer count
	}
	next := s
	next.Log = removeStamps(s.Log, r.AtNanos, units)
	return next, int64(len(s.Log) - len(next.Log))
}

func (slidingWindowLog) shareEnd(_ Limit, _, until int64) int64 { return until }

// grant: the units enter the log stamped with the share's end (see the
// table at the top of shares.go).
func (w slidingWindowLog) grant(l Limit, s State, now, units, until int64) State {
	at := until
	if shareMutation == mutationLogAtGrant {
		at = now
	}
	return State{Log: insertStamps(w.live(l, s, now), at, units)}
}

func (slidingWindowLog) giveBack(_ Limit, s State, sh Share, unspent int64) State {
	return State{Log: removeStamps(s.Log, sh.Until, unspent)}
}

func (slidingWindowLog) restart(_ Limit, s State, _ int64) State {
	var next State
	for _, sh := range s.Shares {
		next.Log = insertStamps(next.Log, sh.Until, sh.Units)
	}
	return next
}
