package algorithms

import (
	"cmp"
	"slices"
	"time"
)

// Shares: part of a limit's budget handed to one holder ahead of use, for
// it to spend on its own without asking again. A share is charged when it
// is granted, as if every unit in it were spent at the latest moment the
// holder may spend it, so that what every holder and every other caller
// admit together never exceeds what the limit admits for one caller:
//
//	buckets (all three)   the units leave the bucket when granted, and while
//	                      shares are outstanding the bucket refills only to
//	                      burst minus their units: a holder that spends at
//	                      the end of its share finds no refill made on its
//	                      behalf. With O outstanding: TAT ≥ now + O×T.
//	fixed_window,         the units count in the window they are granted in,
//	sliding_window_counter and a share ends with that window at the latest,
//	                      so it is never spent in a window that did not count
//	                      it (the counter's next window weighs it as previous,
//	                      as it does every unit of its current one).
//	sliding_window_log    the units enter the log stamped with the share's
//	                      end: from the grant on they count, and they count
//	                      for a whole period after the last instant they can
//	                      be spent.
//
// A holder gives back what it did not spend (GiveBack); what a holder that
// vanished held is lost until its share ends (for the log, a period after),
// never counted twice. The proof that the sum stays within the limit, and
// that what the log loses is bounded by the outstanding shares, is the
// property test TestSharesNeverAdmitMoreThanTheLimit; docs/ARCHITECTURE.md
// gives the argument in words.

// Share is one holder's part of a key's budget: Units of cost, charged when
// granted and spendable until Until (cluster time, nanoseconds). ID names it
// among the key's shares.
type Share struct {
	ID    uint64
	Units int64
	Until int64
}

func shareOrder(a, b Share) int {
	return cmp.Or(cmp.Compare(a.Until, b.Until), cmp.Compare(a.ID, b.ID))
}

// outstanding is the units of shares.
func outstanding(shares []Share) int64 {
	var n int64
	for _, sh := range shares {
		n += sh.Units
	}
	return n
}

// settle brings s to now: the shares that ended by now are dropped, a
// bucket's refill held below them until then. Every question asked of a
// state with shares is asked of it settled. It never writes to memory s
// refers to.
func settle(l Limit, s State, now int64) State {
	if len(s.Shares) == 0 {
		return s
	}
	ended, _ := slices.BinarySearchFunc(s.Shares, now+1, func(sh Share, t int64) int { return cmp.Compare(sh.Until, t) })
	if l.Algorithm.IsBucket() {
		tat, out := tatOf(s), outstanding(s.Shares)
		for _, sh := range s.Shares[:ended] {
			tat = capRefill(l, tat, sh.Until, out)
			out -= sh.Units
		}
		tat = capRefill(l, tat, now, out)
		s.At, s.Frac = tat.nanos, tat.frac
	}
	if s.Shares = s.Shares[ended:]; len(s.Shares) == 0 {
		s.Shares = nil
	}
	return s
}

// capRefill holds a bucket's TAT at least units×T after at: a bucket with
// units outstanding in shares holds at most burst minus them.
func capRefill(l Limit, tat instant, at, units int64) instant {
	if units == 0 || shareMutation == mutationNoRefillCap {
		return tat
	}
	if floor := (instant{nanos: at}).add(emissionSpan(units, l), l.Rate); tat.less(floor) {
		return floor
	}
	return tat
}

// SharesLive reports whether s holds shares that have not ended at now.
func SharesLive(s State, now int64) bool {
	return len(s.Shares) > 0 && s.Shares[len(s.Shares)-1].Until > now
}

// ShareEnd is when a share granted at now for ttl ends: now + ttl, but for
// the fixed window and the sliding window counter no later than the end of
// the window now is in.
func (l Limit) ShareEnd(now int64, ttl time.Duration) int64 {
	return rules[l.Algorithm].shareEnd(l, now, now+int64(ttl))
}

// Grant hands units of the limit at now to a holder as share id, to spend
// until ShareEnd(now, ttl), if the limit can admit units at now; it reports
// whether it did, and returns the share and the state that charges it. units
// must be from 1 to the limit's capacity, ttl positive, and id unused among
// the key's shares. Grant never writes to memory s refers to.
func Grant(l Limit, s State, now, units int64, ttl time.Duration, id uint64) (Share, State, bool) {
	s = settle(l, s, now)
	r := rules[l.Algorithm]
	if r.wait(l, s, now, units) > 0 {
		return Share{}, s, false
	}
	sh := Share{ID: id, Units: units, Until: l.ShareEnd(now, ttl)}
	next := r.grant(l, s, now, units, sh.Until)
	next.Shares = insertShare(s.Shares, sh)
	return sh, next, true
}

// GiveBack returns what a holder did not spend of share id, unspent units
// (at most the share's), at now: the share ends, and its unspent units are
// available again as if never granted. A share that has ended or is unknown
// changes nothing. It returns the new state and the units given back.
func GiveBack(l Limit, s State, now int64, id uint64, unspent int64) (State, int64) {
	s = settle(l, s, now)
	i := slices.IndexFunc(s.Shares, func(sh Share) bool { return sh.ID == id })
	if i < 0 || unspent <= 0 {
		return s, 0
	}
	sh := s.Shares[i]
	unspent = min(unspent, sh.Units)
	next := rules[l.Algorithm].giveBack(l, s, sh, unspent)
	next.Shares = slices.Delete(slices.Clone(s.Shares), i, i+1)
	if len(next.Shares) == 0 {
		next.Shares = nil
	}
	return next, unspent
}

// Restart is the state of a key reset at now: nothing counted but its
// outstanding shares, which stay charged (their holders may still spend
// them). No shares: the zero State.
func Restart(l Limit, s State, now int64) State {
	s = settle(l, s, now)
	if len(s.Shares) == 0 {
		return State{}
	}
	next := rules[l.Algorithm].restart(l, s, now)
	next.Shares = slices.Clone(s.Shares)
	return next
}

// insertShare returns a new slice: shares with sh in order.
func insertShare(shares []Share, sh Share) []Share {
	i, _ := slices.BinarySearchFunc(shares, sh, shareOrder)
	out := make([]Share, 0, len(shares)+1)
	out = append(out, shares[:i]...)
	out = append(out, sh)
	return append(out, shares[i:]...)
}

// insertStamps returns a new sorted log: log with n more stamps at.
func insertStamps(log []int64, at, n int64) []int64 {
	i, _ := slices.BinarySearch(log, at+1)
	out := make([]int64, 0, len(log)+int(n))
	out = append(out, log[:i]...)
	for range n {
		out = append(out, at)
	}
	return append(out, log[i:]...)
}

// removeStamps returns a new log: log with up to n stamps at removed.
func removeStamps(log []int64, at, n int64) []int64 {
	i, _ := slices.BinarySearch(log, at)
	j := i
	for j < len(log) && log[j] == at && int64(j-i) < n {
		j++
	}
	return slices.Concat(log[:i], log[j:])
}

// validShares reports whether shares could be a state's under l: ordered,
// distinct, each of 1 to the capacity units, together at most the capacity.
func validShares(l Limit, s State) bool {
	var total int64
	for i, sh := range s.Shares {
		if sh.Units < 1 || sh.Units > l.Capacity() || (i > 0 && shareOrder(s.Shares[i-1], sh) >= 0) {
			return false
		}
		if total += sh.Units; total > l.Capacity() {
			return false
		}
	}
	return true
}

// sharesExpireAt is the first instant from which s, shares and all, is no
// state: for a bucket, its TAT once every share's hold on its refill has
// run out; for the windows, no earlier than the last share's end.
func sharesExpireAt(l Limit, s State, ruleExpiry int64) int64 {
	if len(s.Shares) == 0 {
		return ruleExpiry
	}
	if !l.Algorithm.IsBucket() {
		return max(ruleExpiry, s.Shares[len(s.Shares)-1].Until)
	}
	tat, out := tatOf(s), outstanding(s.Shares)
	for _, sh := range s.Shares {
		tat = capRefill(l, tat, sh.Until, out)
		out -= sh.Units
	}
	return tat.ceilNanos()
}

// The mutations of the charging rule that the property test must catch:
// each breaks exactness, and shareMutation is set only by this package's
// tests.
const (
	mutationNone = iota
	mutationNoRefillCap
	mutationNoWindowEnd
	mutationLogAtGrant
)

var shareMutation = mutationNone
