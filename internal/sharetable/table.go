// Package sharetable holds shares of keys' budgets for whoever spends them
// (a cluster node, or a Go client): which key is hot enough to ask for a
// share, how much to ask for, spending a share until it ends, asking for
// the next one before it runs out, and what to give back at the end.
//
// It knows nothing of how a share is asked for or granted: the caller
// sends the asks the table says to, and settles their answers. Exactness
// is the granter's (the cluster charges a share as if every unit were
// spent at its end); the table's part is to stop spending by the deadline
// the grant gives, measured on the monotonic clock from when the request
// that brought it was sent.
//
// What a holder does not spend it gives back (Table.GiveBack), so that a
// share costs the key only what was spent: a share is retired, and what is
// left of it given back, as soon as a newer share of its key arrives, or
// once only a quarter of its time is left (early enough for the return to
// reach the granter before the share ends; a return after that gives
// nothing back). Only a holder that vanishes loses units, until its shares
// end.
package sharetable

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

const (
	// MaxKeys bounds the keys a table tracks; beyond it, requests of new
	// keys are sent as without shares.
	MaxKeys = 1 << 16
	// hotAfter is how many requests of a key within a share's TTL make the
	// table ask for a share of it.
	hotAfter = 2
	// sightings is the size of the table that spots hot keys before they
	// get an entry: keys seen once cost a slot of it, not an entry.
	sightings = 1 << 16
)

// Grant is a share as its holder keeps it: Token names it to the granter
// (and proves the holder holds it), Units may be spent until SpendFor has
// passed since the request that brought it was sent.
type Grant struct {
	Token    string
	Units    int64
	SpendFor time.Duration
}

// returnLead is how long a give-back is given to reach the granter before
// the share ends, when a quarter of the share's time is shorter: a return
// through a follower on a loaded machine was seen to take 115 ms.
const returnLead = 100 * time.Millisecond

// retireAt is when a share granted by g to a request sent at sentAt is
// retired, if nothing retired it sooner: with a quarter of its spending
// time left, or returnLead when that is longer (but never more than half
// of its time), for the return of what is left to reach the granter while
// the share lasts.
func (g *Grant) retireAt(sentAt time.Time) time.Time {
	lead := max(g.SpendFor/4, min(g.SpendFor/2, returnLead))
	return sentAt.Add(g.SpendFor - lead)
}

// Table is one holder's shares, by key. K is what the holder keeps of a
// key to name it when it gives a share back; T is what it keeps of a grant
// to answer from it.
type Table[K, T any] struct {
	now func() time.Time
	// Count, when set, is told of units by what became of them: "granted",
	// "spent", "returned" (handed to GiveBack), "expired" (let go unspent).
	Count func(outcome string, units int64)
	// GiveBack, when set, is handed what is left of the shares the table
	// retires (see the package's doc), on a goroutine of its own, to give
	// back to the granter. Without it, what is left of a retired share is
	// let go.
	GiveBack func([]Return[K])

	// afterFunc runs a function after a while: time.AfterFunc, but for
	// tests.
	afterFunc func(d time.Duration, f func())

	mu     sync.Mutex
	closed bool // Close was called: the table takes no more
	// givingBack counts the give-backs under way; givenBack is signalled
	// when one ends (Close waits for them).
	givingBack int
	givenBack  *sync.Cond
	byKey      map[string]*entry[K, T]
	seed       maphash.Seed
	seen       []sighting // direct-mapped by the key's hash
	lastSweep  time.Time
}

// sighting is what the table remembers of a key without an entry: its
// hash, when it was first seen lately, and how often and for how many
// units since.
type sighting struct {
	hash         uint64
	since        time.Time
	times, units int64
}

// New returns an empty table reading time from now.
func New[K, T any](now func() time.Time) *Table[K, T] {
	t := &Table[K, T]{now: now, byKey: make(map[string]*entry[K, T]), seed: maphash.MakeSeed(), seen: make([]sighting, sightings),
		afterFunc: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
	t.givenBack = sync.NewCond(&t.mu)
	return t
}

// entry is what the table holds of, and knows about, one key.
type entry[K, T any] struct {
	name   K
	ttl    time.Duration
	most   int64
	shares []*held[T] // oldest first
	// asking, when not nil, is closed when the ask under way is answered.
	asking chan struct{}
	// What the holder saw of the key: requests and units in the current
	// window (a TTL long, from seenFrom) and the one before.
	seenFrom               time.Time
	requests, lastRequests int64
	units, lastUnits       int64
	lastUsed               time.Time
	// granted: the last ask brought a share; renewing: the ask under way
	// is a renewal; closed: the holder is stopping and takes no more.
	granted, renewing, closed bool
}

// held is one share.
type held[T any] struct {
	token       string
	units, left int64
	until       time.Time // monotonic: spent no later than this
	retireAt    time.Time // monotonic: given back from this on
	sentAt      time.Time
	template    T
}

// Key describes a request to Take: its key's name (the table's key) and
// what names the key to the granter, the shares' TTL, the most one share
// should hold, and the request's cost.
type Key[K any] struct {
	Name string
	ID   K
	TTL  time.Duration
	Most int64
	Cost int64
}

// Taken is what Take tells the caller to do with a request.
type Taken[T any] struct {
	// Answered: admit the request from a share; Template is the grant's,
	// Since the time since its request was sent, Left what the holder has
	// left of the key's live shares after this request.
	Answered bool
	Template T
	Since    time.Duration
	Left     int64
	// Ask, when positive, is the share to ask for with the request; the
	// caller must Settle the key once it has the answer.
	Ask int64
	// Renew, when positive, is the share to ask for in the background (a
	// request of cost 0); the caller must Settle it too.
	Renew int64
}

// Take answers a request of k.Cost on key k.Name from a share the holder
// has, or says how to send it: with a share ask when the key is hot and no
// ask is under way, else as it is. While an ask of the key that brought a
// share last time is under way, it waits for its answer once.
func (t *Table[K, T]) Take(ctx context.Context, k Key[K]) Taken[T] {
	counted, waited := false, false
	for {
		t.mu.Lock()
		now := t.now()
		e := t.entry(k, now, !counted)
		if e == nil {
			t.mu.Unlock()
			return Taken[T]{}
		}
		if !counted {
			e.see(now, k.Cost)
			counted = true
		}
		h, retired := t.spendable(e, now, k.Cost)
		if h != nil {
			h.left -= k.Cost
			out := Taken[T]{Answered: true, Template: h.template, Since: now.Sub(h.sentAt), Left: e.left(now), Renew: e.renewal(now)}
			t.mu.Unlock()
			t.count("spent", k.Cost)
			t.giveBack(retired)
			return out
		}
		switch {
		case e.asking == nil && !waited:
			var out Taken[T]
			if e.requests+e.lastRequests >= hotAfter && !e.closed {
				out.Ask = e.ask(k.Cost)
				e.asking = make(chan struct{})
			}
			t.mu.Unlock()
			t.giveBack(retired)
			return out
		case e.asking == nil || waited || !e.granted:
			// Waiting again, or for an ask that will likely bring
			// nothing, would line the key's requests up one by one.
			t.mu.Unlock()
			t.giveBack(retired)
			return Taken[T]{}
		}
		asking := e.asking
		t.mu.Unlock()
		t.giveBack(retired)
		select {
		case <-asking:
			waited = true
		case <-ctx.Done():
			return Taken[T]{}
		}
	}
}

func (t *Table[K, T]) count(outcome string, units int64) {
	if t.Count != nil && units > 0 {
		t.Count(outcome, units)
	}
}

// entry returns k's entry; nil when it has none and is not yet seen often
// enough for one (a sighting counts when sighted), or the table is full.
func (t *Table[K, T]) entry(k Key[K], now time.Time, sighted bool) *entry[K, T] {
	e := t.byKey[k.Name]
	if e == nil {
		if !sighted || t.closed {
			return nil
		}
		before, hot := t.sight(k, now)
		if !hot || (len(t.byKey) >= MaxKeys && !t.sweep(now)) {
			return nil
		}
		// The sightings before this request count as the entry's own.
		e = &entry[K, T]{name: k.ID, seenFrom: before.since, requests: before.times, units: before.units}
		t.byKey[k.Name] = e
	}
	e.ttl, e.most = k.TTL, k.Most
	return e
}

// sight counts a request of a key without an entry and reports whether
// the key is now hot enough for one (seen hotAfter times within a TTL),
// and what was seen of it before this request. Two keys that share a slot
// only make each other look colder.
func (t *Table[K, T]) sight(k Key[K], now time.Time) (before sighting, hot bool) {
	h := maphash.String(t.seed, k.Name)
	s := &t.seen[h%sightings]
	if s.hash != h || now.Sub(s.since) >= k.TTL {
		*s = sighting{hash: h, since: now}
	}
	if s.times+1 < hotAfter {
		s.times, s.units = s.times+1, s.units+k.Cost
		return sighting{}, false
	}
	before = *s
	*s = sighting{}
	return before, true
}

// sweep drops the entries of keys that hold nothing and were not used for
// a TTL, at most once a second (a full table of busy keys stays full),
// and reports whether that made room.
func (t *Table[K, T]) sweep(now time.Time) bool {
	if now.Sub(t.lastSweep) < time.Second {
		return false
	}
	t.lastSweep = now
	for name, e := range t.byKey {
		if e.asking == nil && !e.renewing && e.left(now) == 0 && now.Sub(e.lastUsed) > e.ttl {
			t.letGo(e)
			delete(t.byKey, name)
		}
	}
	return len(t.byKey) < MaxKeys
}

// see counts a request of cost on the key.
func (e *entry[K, T]) see(now time.Time, cost int64) {
	if now.Sub(e.seenFrom) >= e.ttl {
		e.lastRequests, e.lastUnits = e.requests, e.units
		if now.Sub(e.seenFrom) >= 2*e.ttl {
			e.lastRequests, e.lastUnits = 0, 0
		}
		e.requests, e.units, e.seenFrom = 0, 0, now
	}
	e.requests++
	e.units += cost
	e.lastUsed = now
}

// spendable returns the oldest share with cost left that has not ended,
// after dropping the ones that ended or are spent and retiring the ones
// due (what is left of them to give back: retired).
func (t *Table[K, T]) spendable(e *entry[K, T], now time.Time, cost int64) (found *held[T], retired []Return[K]) {
	kept := e.shares[:0]
	for _, h := range e.shares {
		switch {
		case !now.Before(h.until):
			t.count("expired", h.left)
		case t.GiveBack != nil && !now.Before(h.retireAt):
			retired = t.retire(e, h, retired)
		case h.left == 0 && cost > 0:
		default:
			kept = append(kept, h)
			if found == nil && h.left >= cost {
				found = h
			}
		}
	}
	clear(e.shares[len(kept):])
	e.shares = kept
	return found, retired
}

// retire lets go of share h of e, which the caller drops from e.shares,
// and appends what is left of it to give back to returns. (A table
// without GiveBack retires a share only for a newer one: what is left of
// it is let go.)
func (t *Table[K, T]) retire(e *entry[K, T], h *held[T], returns []Return[K]) []Return[K] {
	if h.left == 0 {
		return returns
	}
	if t.GiveBack == nil {
		t.count("expired", h.left)
		return returns
	}
	t.count("returned", h.left)
	returns = append(returns, Return[K]{Key: e.name, Token: h.token, Unspent: h.left})
	h.left = 0
	return returns
}

// giveBack hands returns to GiveBack on a goroutine of its own. The
// caller does not hold t.mu.
func (t *Table[K, T]) giveBack(returns []Return[K]) {
	if len(returns) == 0 {
		return
	}
	t.mu.Lock()
	t.givingBack++
	t.mu.Unlock()
	go func() {
		t.GiveBack(returns)
		t.mu.Lock()
		t.givingBack--
		t.givenBack.Broadcast()
		t.mu.Unlock()
	}()
}

// retireWhenDue retires share h of key name once its time to be retired
// has come, if it is still held then: run by a timer set when it was
// settled.
func (t *Table[K, T]) retireWhenDue(name string, h *held[T]) {
	t.mu.Lock()
	e := t.byKey[name]
	var retired []Return[K]
	if i := slices.Index(e.sharesOrNil(), h); i >= 0 && !t.now().Before(h.retireAt) {
		retired = t.retire(e, h, nil)
		e.shares = slices.Delete(e.shares, i, i+1)
	}
	t.mu.Unlock()
	t.giveBack(retired)
}

// sharesOrNil is e's shares, nil for no entry.
func (e *entry[K, T]) sharesOrNil() []*held[T] {
	if e == nil {
		return nil
	}
	return e.shares
}

// left is what the holder has left in live shares of the key.
func (e *entry[K, T]) left(now time.Time) int64 {
	var n int64
	for _, h := range e.shares {
		if now.Before(h.until) {
			n += h.left
		}
	}
	return n
}

// ask is the share to ask for: twice what the holder admitted of the key
// in the last TTL, at least twice cost and at least 2, at most most.
func (e *entry[K, T]) ask(cost int64) int64 {
	return min(max(2*max(e.units, e.lastUnits), 2*cost, 2), e.most)
}

// renewal returns the share to ask for in the background when one is due
// (the newest share half spent or half over) and none is under way; 0
// otherwise.
func (e *entry[K, T]) renewal(now time.Time) int64 {
	if e.asking != nil || e.renewing || e.closed || len(e.shares) == 0 {
		return 0
	}
	newest := e.shares[len(e.shares)-1]
	if 2*newest.left > newest.units && 2*newest.until.Sub(now) > newest.until.Sub(newest.sentAt) {
		return 0
	}
	e.renewing = true
	e.asking = make(chan struct{})
	return e.ask(0)
}

// Settle takes the answer to an ask (from Take's Ask or Renew) of key
// name, sent at sentAt: g, nil when the ask failed or brought no share,
// is held from now on with template, and the key's older shares are
// retired; the requests waiting for the ask look again.
func (t *Table[K, T]) Settle(name string, sentAt time.Time, g *Grant, template T) {
	retired := t.settle(name, sentAt, g, template)
	t.giveBack(retired)
}

func (t *Table[K, T]) settle(name string, sentAt time.Time, g *Grant, template T) (retired []Return[K]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byKey[name]
	if e == nil {
		return nil
	}
	if e.asking != nil {
		close(e.asking)
		e.asking = nil
	}
	e.renewing = false
	e.granted = g != nil
	if g == nil || g.SpendFor <= 0 {
		return nil
	}
	if e.closed {
		// Asked before Close, answered after: given back whole.
		h := &held[T]{token: g.Token, units: g.Units, left: g.Units}
		t.count("granted", g.Units)
		return t.retire(e, h, nil)
	}
	for _, h := range e.shares {
		retired = t.retire(e, h, retired)
	}
	h := &held[T]{token: g.Token, units: g.Units, left: g.Units, until: sentAt.Add(g.SpendFor), retireAt: g.retireAt(sentAt), sentAt: sentAt, template: template}
	e.shares = append(e.shares[:0], h)
	t.count("granted", g.Units)
	if t.GiveBack != nil {
		t.afterFunc(h.retireAt.Sub(t.now()), func() { t.retireWhenDue(name, h) })
	}
	return retired
}

// letGo counts what the key's shares held when the holder let go of them.
func (t *Table[K, T]) letGo(e *entry[K, T]) {
	for _, h := range e.shares {
		t.count("expired", h.left)
	}
	e.shares = nil
}

// Return is an unspent share to give back: the key's name to the granter,
// the share's token and what is left of it.
type Return[K any] struct {
	Key     K
	Token   string
	Unspent int64
}

// Close lets go of every share, takes no more (requests of every key, new
// or not, are sent as without shares from then on), waits for the
// give-backs under way, and returns the live shares with units left: what
// the holder gives back as it stops. (A share asked before Close and
// granted after is given back through GiveBack.)
func (t *Table[K, T]) Close() []Return[K] {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.givingBack > 0 {
		t.givenBack.Wait()
	}
	t.closed = true
	now := t.now()
	var out []Return[K]
	for _, e := range t.byKey {
		e.closed = true
		for _, h := range e.shares {
			if h.left > 0 && now.Before(h.until) {
				out = append(out, Return[K]{Key: e.name, Token: h.token, Unspent: h.left})
			}
		}
		e.shares = nil
	}
	return out
}
