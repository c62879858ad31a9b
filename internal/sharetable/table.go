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
package sharetable

import (
	"context"
	"hash/maphash"
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

// Grant is a share as its holder keeps it: ID names it to the granter,
// Units may be spent until SpendFor has passed since the request that
// brought it was sent.
type Grant struct {
	ID       uint64
	Units    int64
	SpendFor time.Duration
}

// Table is one holder's shares, by key. K is what the holder keeps of a
// key to name it when it gives a share back; T is what it keeps of a grant
// to answer from it.
type Table[K, T any] struct {
	now func() time.Time
	// Count, when set, is told of units by what became of them: "granted",
	// "spent", "expired" (let go unspent).
	Count func(outcome string, units int64)

	mu        sync.Mutex
	byKey     map[string]*entry[K, T]
	seed      maphash.Seed
	seen      []sighting // direct-mapped by the key's hash
	lastSweep time.Time
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
	return &Table[K, T]{now: now, byKey: make(map[string]*entry[K, T]), seed: maphash.MakeSeed(), seen: make([]sighting, sightings)}
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
	id          uint64
	units, left int64
	until       time.Time // monotonic
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
		if h := t.spendable(e, now, k.Cost); h != nil {
			h.left -= k.Cost
			out := Taken[T]{Answered: true, Template: h.template, Since: now.Sub(h.sentAt), Left: e.left(now), Renew: e.renewal(now)}
			t.mu.Unlock()
			t.count("spent", k.Cost)
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
			return out
		case e.asking == nil || waited || !e.granted:
			// Waiting again, or for an ask that will likely bring
			// nothing, would line the key's requests up one by one.
			t.mu.Unlock()
			return Taken[T]{}
		}
		asking := e.asking
		t.mu.Unlock()
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
		if !sighted {
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
// after dropping the ones that ended or are spent.
func (t *Table[K, T]) spendable(e *entry[K, T], now time.Time, cost int64) *held[T] {
	kept := e.shares[:0]
	var found *held[T]
	for _, h := range e.shares {
		switch {
		case !now.Before(h.until):
			t.count("expired", h.left)
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
	return found
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
// is held from now on with template; the requests waiting for the ask look
// again.
func (t *Table[K, T]) Settle(name string, sentAt time.Time, g *Grant, template T) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byKey[name]
	if e == nil {
		return
	}
	if e.asking != nil {
		close(e.asking)
		e.asking = nil
	}
	e.renewing = false
	e.granted = g != nil
	if g == nil || e.closed || g.SpendFor <= 0 {
		return
	}
	e.shares = append(e.shares, &held[T]{id: g.ID, units: g.Units, left: g.Units, until: sentAt.Add(g.SpendFor), sentAt: sentAt, template: template})
	t.count("granted", g.Units)
}

// letGo counts what the key's shares held when the holder let go of them.
func (t *Table[K, T]) letGo(e *entry[K, T]) {
	for _, h := range e.shares {
		t.count("expired", h.left)
	}
	e.shares = nil
}

// Return is an unspent share to give back: the key's name to the granter,
// the share's ID and what is left of it.
type Return[K any] struct {
	Key     K
	ID      uint64
	Unspent int64
}

// Close lets go of every share, takes no more, and returns the live ones
// with units left: what the holder gives back as it stops.
func (t *Table[K, T]) Close() []Return[K] {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var out []Return[K]
	for _, e := range t.byKey {
		e.closed = true
		for _, h := range e.shares {
			if h.left > 0 && now.Before(h.until) {
				out = append(out, Return[K]{Key: e.name, ID: h.id, Unspent: h.left})
			}
		}
		e.shares = nil
	}
	return out
}
