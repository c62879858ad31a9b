// Package topk finds the heavy hitters of a stream in bounded memory: the
// keys added most often, each with a count that is off by a known amount.
// It is what shows "the most denied keys of the last minute" on a status
// page without keeping a counter per key ever seen.
//
// A [Sketch] is the space-saving summary of Metwally, Agrawal and El Abbadi
// ("Efficient computation of frequent and top-k elements in data streams",
// ICDT 2005) with at most k counters. After adds totalling N, every key it
// reports has:
//
//	Count - Error <= true count <= Count,  0 <= Error <= N/k (integer division),
//
// and every key whose true count exceeds N/k is tracked, so it is among the
// first k keys that Top returns. With at most k distinct keys the counts are
// exact (Error 0).
//
// A [Window] keeps one Sketch per time slot and merges the slots of the last
// slots*slot of time. With N_i added in slot i of the window, its bound is
//
//	bound = sum over the window's slots i of N_i/k (integer division, <= N/k),
//
// and every merged key has Count - Error <= true count <= Count and
// Error <= bound; every key whose true count in the window exceeds bound is
// among the merged keys.
//
// Memory: a Sketch holds at most k keys (strings, plus a map entry and a
// counter each); a Window holds at most k*slots keys. Nothing grows with
// the number of distinct keys in the stream.
package topk

import (
	"cmp"
	"slices"
	"time"
)

// Count is one tracked item: Count over-estimates the item's true count by
// at most Error, that is Count - Error <= true count <= Count.
type Count struct {
	Key   string
	Count int64
	Error int64
}

// counter is one slot of a Sketch: a key, its estimated count, the count's
// possible over-estimate, and the counter's position in the heap.
type counter struct {
	key   string
	count int64
	err   int64
	pos   int32
}

// Sketch is a space-saving summary with at most k counters. Not safe for
// concurrent use.
//
// The counters sit in a slab allocated once; a map finds a key's counter
// and a binary min-heap of counter indices (ordered by count) finds the
// smallest. A count only ever grows, so an Add moves its counter down the
// heap at most log2(k) levels: Add is O(log k), never a scan of the k
// counters.
type Sketch struct {
	k     int
	total int64
	slab  []counter        // len = counters in use, cap = k
	heap  []int32          // indices into slab; heap[0] has the least count
	index map[string]int32 // key -> index into slab
}

// NewSketch returns an empty Sketch of at most k counters. It panics if
// k < 1 or if k does not fit in an int32.
func NewSketch(k int) *Sketch {
	if k < 1 || int64(k) > 1<<31-1 {
		panic("topk: NewSketch needs 1 <= k < 2^31")
	}
	return &Sketch{
		k:     k,
		slab:  make([]counter, 0, k),
		heap:  make([]int32, 0, k),
		index: make(map[string]int32, k),
	}
}

// Add counts n more occurrences of key; n <= 0 is ignored.
//
// A tracked key's counter grows by n. An untracked key takes a free counter
// (count n, Error 0) or, when all k are in use, replaces the key with the
// least count m: it gets count m+n and Error m, since it may have occurred
// up to m times while untracked. The counters always sum to Total(), so
// m <= Total()/k.
func (s *Sketch) Add(key string, n int64) {
	if n <= 0 {
		return
	}
	s.total += n
	if i, ok := s.index[key]; ok {
		c := &s.slab[i]
		c.count += n
		s.down(int(c.pos))
		return
	}
	if len(s.slab) < s.k {
		i := int32(len(s.slab))
		s.slab = append(s.slab, counter{key: key, count: n, pos: int32(len(s.heap))})
		s.heap = append(s.heap, i)
		s.index[key] = i
		s.up(len(s.heap) - 1)
		return
	}
	i := s.heap[0]
	c := &s.slab[i]
	delete(s.index, c.key)
	s.index[key] = i
	c.key = key
	c.err = c.count
	c.count += n
	s.down(0)
}

// less orders the heap by count.
func (s *Sketch) less(a, b int) bool {
	return s.slab[s.heap[a]].count < s.slab[s.heap[b]].count
}

func (s *Sketch) swap(a, b int) {
	h := s.heap
	h[a], h[b] = h[b], h[a]
	s.slab[h[a]].pos = int32(a)
	s.slab[h[b]].pos = int32(b)
}

// up moves the counter at heap position i towards the root while it is
// less than its parent (a new counter may be less than the others).
func (s *Sketch) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

// down moves the counter at heap position i towards the leaves while a
// child is less than it (a count that grew).
func (s *Sketch) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.swap(i, m)
		i = m
	}
}

// Total returns the sum of all n added (ignoring n <= 0) since the Sketch
// was made or last Reset.
func (s *Sketch) Total() int64 { return s.total }

// full reports whether all k counters are in use: only then can a key
// have occurred without being tracked.
func (s *Sketch) full() bool { return len(s.slab) == s.k }

// min returns the least count, the most an untracked key may have occurred
// (at most Total()/k); 0 if the sketch is not full, for then every key that
// occurred is tracked.
func (s *Sketch) min() int64 {
	if !s.full() {
		return 0
	}
	return s.slab[s.heap[0]].count
}

// Top returns up to n tracked items, Count descending, then Key ascending.
// Each has Count - Error <= true count <= Count and Error <= Total()/k
// (integer division); a key whose true count exceeds Total()/k is always
// tracked, so it is returned when n >= k. It follows that a key whose true
// count exceeds another's by more than Total()/k is listed before it. Top
// is O(k log k); it returns nil if n <= 0 or nothing was added.
func (s *Sketch) Top(n int) []Count {
	if n <= 0 || len(s.slab) == 0 {
		return nil
	}
	out := make([]Count, len(s.slab))
	for i, c := range s.slab {
		out[i] = Count{Key: c.key, Count: c.count, Error: c.err}
	}
	sortCounts(out)
	if len(out) > n {
		out = out[:n:n]
	}
	return out
}

// Reset empties the Sketch, keeping its memory for reuse.
func (s *Sketch) Reset() {
	clear(s.slab) // drop the key strings for the garbage collector
	s.slab = s.slab[:0]
	s.heap = s.heap[:0]
	clear(s.index)
	s.total = 0
}

// sortCounts orders by Count descending, then Key ascending: keys are
// unique, so the order is total and the output deterministic.
func sortCounts(c []Count) {
	slices.SortFunc(c, func(a, b Count) int {
		if r := cmp.Compare(b.Count, a.Count); r != 0 {
			return r
		}
		return cmp.Compare(a.Key, b.Key)
	})
}

// ringSlot is one slot of a Window: the Sketch of the slot-long interval
// number idx (time floor(atNanos/slot)), if used.
type ringSlot struct {
	used   bool
	idx    int64
	sketch *Sketch
}

// Window keeps one Sketch per slot of `slot` length (aligned to multiples
// of slot since the Unix epoch), `slots` of them, so Top covers the last
// slots*slot of time. Not safe for concurrent use.
//
// Slot number j = floor(atNanos/slot) lives in ring position j mod slots.
// Memory is at most k*slots keys; each slot's Sketch is allocated on first
// use and reused (Reset) when its position is recycled for a newer slot.
type Window struct {
	k      int
	slot   int64
	ring   []ringSlot
	newest int64 // the greatest slot number added, if started
	start  bool
}

// NewWindow returns an empty Window of `slots` sketches of k counters, each
// covering `slot` of time. It panics if k < 1, slots < 1 or slot <= 0.
func NewWindow(k, slots int, slot time.Duration) *Window {
	if k < 1 || int64(k) > 1<<31-1 {
		panic("topk: NewWindow needs 1 <= k < 2^31")
	}
	if slots < 1 {
		panic("topk: NewWindow needs slots >= 1")
	}
	if slot <= 0 {
		panic("topk: NewWindow needs slot > 0")
	}
	return &Window{k: k, slot: int64(slot), ring: make([]ringSlot, slots)}
}

// floorDiv is a/b rounded towards minus infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// within reports whether slot number j is one of the `slots` slot numbers
// ending at last: last-slots < j <= last (without overflow).
func within(j, last int64, slots int) bool {
	return j <= last && uint64(last)-uint64(j) < uint64(slots)
}

// Add counts n more occurrences of key at time atNanos (n <= 0 is
// ignored). The time's slot is floor(atNanos/slot). A slot older than the
// window of the newest slot added so far (newest-slots or before) is
// dropped; a newer slot recycles the ring position of the slot `slots`
// before it (or older), whose counts are then forgotten.
func (w *Window) Add(atNanos int64, key string, n int64) {
	if n <= 0 {
		return
	}
	j := floorDiv(atNanos, w.slot)
	if w.start && j < w.newest && !within(j, w.newest, len(w.ring)) {
		return
	}
	if !w.start || j > w.newest {
		w.newest, w.start = j, true
	}
	pos := j % int64(len(w.ring))
	if pos < 0 {
		pos += int64(len(w.ring))
	}
	r := &w.ring[pos]
	switch {
	case r.sketch == nil:
		r.sketch = NewSketch(w.k)
	case !r.used || r.idx != j:
		// r.idx < j: position j mod slots held a slot at least `slots`
		// older, outside the window of j.
		r.sketch.Reset()
	}
	r.used, r.idx = true, j
	r.sketch.Add(key, n)
}

// merged is one key's sums while merging a Window's slots.
type merged struct {
	count, err int64
}

// Top merges the slots within (nowNanos - slots*slot, nowNanos] — the slot
// of nowNanos and the slots-1 slots before it; slots after nowNanos's are
// left out — and returns up to n items (Count descending, then Key
// ascending), the total added in those slots, and
//
//	bound = sum over those slots of (slot total / k)  (integer division).
//
// A key's Count is the sum over those slots of its count where tracked
// plus, where it is not tracked but the slot's sketch is full, that slot's
// least count (the most it may have occurred there unseen); where the
// slot's sketch is not full an untracked key did not occur. Its Error is
// the sum of its per-slot errors plus those least counts. Each per-slot
// term is at most that slot's total/k, so for every returned item
//
//	Count - Error <= true count in those slots <= Count,  Error <= bound,
//
// and every key whose true count exceeds bound is tracked in some slot, so
// it is returned if n is large enough (n >= k*slots always is). It follows
// that a key whose true count exceeds another's by more than bound is
// listed before it.
//
// The counts are those the Window still holds: queried with nowNanos in the
// newest slot added or later (as a status page does), that is everything
// added in those slots; queried further back, slots recycled since are
// missing (and counted neither in total nor in bound). Top is
// O(k*slots * log(k*slots)); it returns nil items if n <= 0 or nothing was
// added in those slots.
func (w *Window) Top(nowNanos int64, n int) (top []Count, total int64, bound int64) {
	last := floorDiv(nowNanos, w.slot)
	var sketches []*Sketch
	var minSum int64 // sum of the least counts of the full sketches
	for i := range w.ring {
		r := &w.ring[i]
		if !r.used || !within(r.idx, last, len(w.ring)) {
			continue
		}
		s := r.sketch
		sketches = append(sketches, s)
		total += s.Total()
		bound += s.Total() / int64(w.k)
		minSum += s.min()
	}
	if n <= 0 || total == 0 {
		return nil, total, bound
	}
	// Every key starts with every full slot's least count, as if untracked
	// everywhere; a slot that tracks it swaps that for its count and error.
	keys := make(map[string]*merged)
	var arena []merged
	for _, s := range sketches {
		m := s.min()
		for _, c := range s.slab {
			e, ok := keys[c.key]
			if !ok {
				if len(arena) == cap(arena) {
					arena = make([]merged, 0, max(64, 2*cap(arena)))
				}
				arena = append(arena, merged{minSum, minSum})
				e = &arena[len(arena)-1]
				keys[c.key] = e
			}
			e.count += c.count - m
			e.err += c.err - m
		}
	}
	top = make([]Count, 0, len(keys))
	for k, e := range keys {
		top = append(top, Count{Key: k, Count: e.count, Error: e.err})
	}
	sortCounts(top) // a total order: the map's order does not reach the output
	if len(top) > n {
		top = top[:n:n]
	}
	return top, total, bound
}
