package denylease

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/holdtime"
)

// maxLeases bounds a node's table: a flood over many keys keeps the leases
// that fit, and the others ask the leader as before.
const maxLeases = 1 << 16

// Table is one node's deny leases, by the kind of request they answer
// (KindOf).
type Table struct {
	cap  time.Duration
	rate float64 // how much faster than real time cluster time may run
	now  func() time.Time

	mu     sync.Mutex
	byKind map[string]*lease
	live   atomic.Int64 // len(byKind), read without the lock
}

// lease is one lease: the denial to answer with until the lease ends,
// or, once it has ended, the request asking again on behalf of every
// request of its kind (probe).
type lease struct {
	until  time.Time // monotonic reading
	sentAt time.Time // when the request it answers was sent
	result fsm.Result
	// keys are the keys the denial counts on (leaseKeys), so that a
	// raise of one key drops only the leases it may contradict; nil for
	// a lease that may count on any.
	keys []string
	// probe, when not nil, is the request that asks again on behalf of
	// its kind; waiting counts the requests waiting for its answer.
	probe   *probe
	waiting int
}

// probe is a request asking the leader on behalf of its kind. done is
// closed when it has its answer; denial is then that answer when it was a
// denial that says how long it holds, and sentAt when the probe was sent.
//
// A request of the kind that began waiting before the probe was sent may
// take that denial as its own answer, however short it holds: the leader
// decided it after the probe was sent, so while the waiting request was
// under way, on the state every request of the kind shares (a denial of
// this kind changes nothing in it). That is its linearization point, and
// the time its answer gives.
type probe struct {
	done   chan struct{}
	sentAt time.Time
	denial *fsm.Result
}

// New is a table of leases of at most limit, for a cluster whose
// time runs at most rate faster than real time; nil (no leases) when limit
// is not positive.
func New(limit time.Duration, rate float64, now func() time.Time) *Table {
	if limit <= 0 {
		return nil
	}
	return &Table{cap: limit, rate: rate, now: now, byKind: make(map[string]*lease)}
}

// Answer returns the denial a live lease gives a request of kind key, or waits, when its
// lease has ended and another request of its kind is asking the leader,
// for that one's answer. ok is false when the request must ask the leader itself;
// probing is then true when it asks on behalf of its kind, and the caller
// must call Settle when it has its answer.
func (t *Table) Answer(ctx context.Context, key string) (res fsm.Result, ok, probing bool) {
	for {
		t.mu.Lock()
		l := t.byKind[key]
		switch {
		case l == nil:
			t.mu.Unlock()
			return fsm.Result{}, false, false
		case l.probe == nil && t.now().Before(l.until):
			res = leasedDenial(l.result, t.now().Sub(l.sentAt), t.rate)
			t.mu.Unlock()
			return res, true, false
		case l.probe == nil:
			l.probe = &probe{done: make(chan struct{})}
			t.mu.Unlock()
			return fsm.Result{}, false, true
		}
		p := l.probe
		l.waiting++
		joined := t.now()
		t.mu.Unlock()
		select {
		case <-p.done:
		case <-ctx.Done():
			t.mu.Lock()
			l.waiting--
			t.mu.Unlock()
			return fsm.Result{}, false, false
		}
		t.mu.Lock()
		l.waiting--
		now := t.now()
		t.mu.Unlock()
		if p.denial != nil && !joined.After(p.sentAt) {
			return probedDenial(*p.denial, now.Sub(p.sentAt)), true, false
		}
	}
}

// probedDenial is the answer a request that waited for a probe takes from
// the probe's denial, elapsed after the probe was sent: the same denial at
// the time the leader decided it, its waits shorter by elapsed (a retry at
// least a millisecond away).
func probedDenial(r fsm.Result, elapsed time.Duration) fsm.Result {
	out := r.WaitsShortenedBy(elapsed)
	out.DenyForNanos = 0 // it starts no lease
	out.Leased = true
	return out
}

// Settle takes what the leader answered request r of kind key that was
// sent at sentAt: a denial that says how long it holds becomes the kind's
// lease (taken reports that); anything else ends it. A probe's waiters then
// look again.
func (t *Table) Settle(key string, r *fsm.Request, sentAt time.Time, res *fsm.Result) (taken bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.byKind[key]
	if l != nil && l.probe != nil {
		l.probe.sentAt = sentAt
		if repeatableDenial(res) {
			denial := *res
			l.probe.denial = &denial
		}
		close(l.probe.done)
		l.probe = nil
	}
	now := t.now()
	lasts := t.lasts(res)
	if lasts <= 0 || !now.Before(sentAt.Add(lasts)) {
		// No lease, or one that ended before its answer came back. An
		// admission that took what was left hands the asking over to one
		// of the requests waiting, if the next unit comes later than an
		// answer takes (the next ask will likely bring a lease that
		// outlives its trip); anything else lets them all ask at once.
		handOver := l != nil && l.waiting > 0 && res.TookTheLast() && refillsAfter(res) > now.Sub(sentAt)
		if l != nil && !now.Before(l.until) && !handOver {
			delete(t.byKind, key)
			t.live.Add(-1)
		}
		return false
	}
	until := sentAt.Add(lasts)
	if l != nil && l.until.After(until) {
		return false // a longer lease, taken by a request sent later
	}
	if l == nil {
		if len(t.byKind) >= maxLeases && !t.sweep() {
			return false
		}
		t.live.Add(1)
	}
	t.byKind[key] = &lease{until: until, sentAt: sentAt, result: *res, keys: leaseKeys(r, res)}
	return true
}

// leaseKeys are the keys the denial res of r counts on: each check's key
// as the leader decided it (a policy's template may have made it from
// dimensions). nil for an RLS query, whose limits' keys the node does not
// know: its lease ends with any raise.
func leaseKeys(r *fsm.Request, res *fsm.Result) []string {
	if r == nil || r.RLS != nil || len(res.Checks) != len(r.Checks) {
		return nil
	}
	keys := make([]string, len(r.Checks))
	for i := range r.Checks {
		keys[i] = cmp.Or(res.Checks[i].Key, r.Checks[i].Key)
	}
	return keys
}

// contradictedBy reports whether a raise of key (every key, when "") may
// contradict lease l.
func (l *lease) contradictedBy(key string) bool {
	return key == "" || l.keys == nil || slices.Contains(l.keys, key)
}

// refillsAfter is how long after res until the checks that res left
// empty have a unit again.
func refillsAfter(res *fsm.Result) time.Duration {
	var d int64
	for i := range res.Checks {
		if c := &res.Checks[i].Decision; c.Remaining == 0 {
			d = max(d, int64(c.RefillAfter))
		}
	}
	return time.Duration(d)
}

// repeatableDenial reports whether res is a denial that holds for a while
// if only time passes (it says how long).
func repeatableDenial(res *fsm.Result) bool {
	return !res.Allowed && res.Rejection == nil && res.DenyForNanos > 0
}

// HoldsAny reports whether the table may hold a lease, without locking: a
// node that holds none builds no key for a request.
func (t *Table) HoldsAny() bool { return t.live.Load() > 0 }

// sweep drops the leases that have ended and reports whether that made
// room.
func (t *Table) sweep() bool {
	now := t.now()
	for key, l := range t.byKind {
		if l.probe == nil && !now.Before(l.until) {
			delete(t.byKind, key)
			t.live.Add(-1)
		}
	}
	return len(t.byKind) < maxLeases
}

// lasts is how long, from when it was sent, a request answered with res may
// be answered so again: its denial's duration less what cluster time may
// run ahead of real time and the margin, at most the cap.
func (t *Table) lasts(res *fsm.Result) time.Duration {
	if !repeatableDenial(res) || t.cap <= 0 {
		return 0
	}
	return min(holdtime.Lasts(res.DenyForNanos, t.rate), t.cap)
}

// Clear drops every lease a raise of key (every key, when "") may
// contradict: a command that gives capacity back was applied. A probe under
// way keeps its place, so that its waiters hear its answer.
func (t *Table) Clear(raised string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, l := range t.byKind {
		switch {
		case !l.contradictedBy(raised):
		case l.probe == nil:
			delete(t.byKind, key)
			t.live.Add(-1)
		default:
			l.until = time.Time{}
		}
	}
}

// leasedDenial is the answer a lease gives elapsed after its request was
// sent: the same denial, its waits shorter by elapsed (a retry at least a
// millisecond away), at the latest cluster time it may be now: the time it
// counts from plus elapsed, and what cluster time may run ahead (rate).
func leasedDenial(r fsm.Result, elapsed time.Duration, rate float64) fsm.Result {
	out := r.WaitsShortenedBy(elapsed)
	out.AtNanos = holdtime.LatestClusterTime(r.DenyAtNanos, elapsed, rate)
	out.DenyForNanos = holdtime.Shorten(r.DenyForNanos, elapsed)
	out.DenyAtNanos = out.AtNanos
	out.Leased = true
	return out
}
