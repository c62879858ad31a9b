package fsm

import (
	"container/heap"
	"hash/maphash"
	"slices"

	"github.com/limitnode/limitnode/algorithms"
)

// The bucket store keeps the state of every live (key, limit) pair in as
// little memory as a Go program reasonably can, since a node may hold
// millions: about 100 bytes of heap per key (see BenchmarkStateBytesPerKey).
//
//   - What a bucket is limited by (an inline limit, or a policy) is interned
//     as a small integer: limits are few, keys are many.
//   - Buckets are fixed-size slots in slabs of 4096, reused through a free
//     list, so there is no per-key allocation besides the key itself.
//   - Lookup is an open-addressing hash table of slot numbers (linear
//     probing, at most half full), 4 bytes a slot.
//   - Expiry is a binary heap of slot numbers ordered by (expiry, key,
//     policy, limit): which buckets an apply deletes depends only on the
//     state, never on insertion history or hash seeds.
//
// None of the internal numbering (slot numbers, target IDs, hash layout)
// reaches a decision or a snapshot, so replicas may number differently.

const slabSize = 4096

// targetKey is what a bucket is limited by: an inline limit (policy "") or
// a named policy (limit zero).
type targetKey struct {
	policy string
	limit  algorithms.Limit
}

type targetEntry struct {
	key  targetKey
	refs int32
}

// slot is one live bucket. Fields are ordered to pack into 72 bytes.
type slot struct {
	key       string
	target    uint32 // what limits the bucket (an index into targets)
	under     uint32 // for a policy bucket: the limit its state is under; 0 otherwise
	heapIndex int32
	expiresAt int64
	at        int64
	n         int64 // Frac for the bucket algorithms, Count for the windows
	previous  int64
	extra     *slotExtra // what few buckets hold: a log, shares
}

// slotExtra is the part of a bucket's state most buckets do not have: the
// sliding window log's timestamps, and outstanding shares. Never written
// once stored (a snapshot may read it): a new state gets a new one.
type slotExtra struct {
	log    []int64
	shares []algorithms.Share
}

type bucketStore struct {
	targets    []targetEntry // index 0 unused: 0 means "none"
	targetIDs  map[targetKey]uint32
	freeTarget []uint32

	slabs     [][]slot
	shared    []bool // shared[k]: a snapshot holds slabs[k]; copy it before writing
	freeSlots []uint32
	count     int

	seed  maphash.Seed
	table []uint32 // slot number + 1; 0 is empty

	expiry []uint32 // heap of slot numbers
}

func newBucketStore() *bucketStore {
	return &bucketStore{targets: make([]targetEntry, 1), targetIDs: map[targetKey]uint32{}, seed: maphash.MakeSeed(), table: make([]uint32, 16)}
}

func (s *bucketStore) len() int { return s.count }

func (s *bucketStore) slot(i uint32) *slot { return &s.slabs[i/slabSize][i%slabSize] }

// mutable returns a slot to write to. A slab a snapshot still reads is
// copied first (copy-on-write), so taking a snapshot costs a copy of the
// slab list, not of every bucket, while applies wait.
func (s *bucketStore) mutable(i uint32) *slot {
	k := i / slabSize
	if s.shared[k] {
		s.slabs[k] = slices.Clone(s.slabs[k])
		s.shared[k] = false
	}
	return &s.slabs[k][i%slabSize]
}

func targetOf(id bucketKey) targetKey { return targetKey{policy: id.policy, limit: id.limit} }

// acquire returns the ID of a target, interning it, and counts a use.
func (s *bucketStore) acquire(k targetKey) uint32 {
	if id, ok := s.targetIDs[k]; ok {
		s.targets[id].refs++
		return id
	}
	var id uint32
	if n := len(s.freeTarget); n > 0 {
		id = s.freeTarget[n-1]
		s.freeTarget = s.freeTarget[:n-1]
	} else {
		id = uint32(len(s.targets))
		s.targets = append(s.targets, targetEntry{})
	}
	s.targets[id] = targetEntry{key: k, refs: 1}
	s.targetIDs[k] = id
	return id
}

func (s *bucketStore) release(id uint32) {
	if id == 0 {
		return
	}
	if s.targets[id].refs--; s.targets[id].refs == 0 {
		delete(s.targetIDs, s.targets[id].key)
		s.targets[id] = targetEntry{}
		s.freeTarget = append(s.freeTarget, id)
	}
}

func (s *bucketStore) hash(key string, target uint32) uint64 {
	return maphash.String(s.seed, key) ^ (uint64(target) * 0x9e3779b97f4a7c15)
}

// find returns the slot of a bucket.
func (s *bucketStore) find(id bucketKey) (uint32, bool) {
	target, ok := s.targetIDs[targetOf(id)]
	if !ok {
		return 0, false
	}
	return s.findUnder(id.key, target)
}

// bucketsOf returns the slots of every bucket of key, whatever limits it:
// one lookup per target (limits and policies are few; keys are many).
func (s *bucketStore) bucketsOf(key string) []uint32 {
	var out []uint32
	for target, t := range s.targets {
		if target == 0 || t.refs == 0 {
			continue
		}
		if i, ok := s.findUnder(key, uint32(target)); ok {
			out = append(out, i)
		}
	}
	return out
}

// delete removes a bucket from the expiry heap and the store.
func (s *bucketStore) delete(i uint32) {
	heap.Remove(byExpiry{s}, int(s.slot(i).heapIndex))
	s.remove(i)
}

// findUnder returns the slot of key's bucket limited by target.
func (s *bucketStore) findUnder(key string, target uint32) (uint32, bool) {
	mask := uint64(len(s.table) - 1)
	for i := s.hash(key, target) & mask; ; i = (i + 1) & mask {
		v := s.table[i]
		if v == 0 {
			return 0, false
		}
		if sl := s.slot(v - 1); sl.target == target && sl.key == key {
			return v - 1, true
		}
	}
}

// limitOf returns the limit a slot's state is under.
func (s *bucketStore) limitOf(sl *slot) algorithms.Limit {
	if sl.under != 0 {
		return s.targets[sl.under].key.limit
	}
	return s.targets[sl.target].key.limit
}

// get returns a bucket's slot, its state and the limit it is under.
func (s *bucketStore) get(id bucketKey) (uint32, algorithms.State, algorithms.Limit, bool) {
	i, ok := s.find(id)
	if !ok {
		return 0, algorithms.State{}, algorithms.Limit{}, false
	}
	sl := s.slot(i)
	l := s.limitOf(sl)
	return i, unpackState(l, sl), l, true
}

func unpackState(l algorithms.Limit, sl *slot) algorithms.State {
	var st algorithms.State
	switch {
	case l.Algorithm.IsBucket():
		st = algorithms.State{At: sl.at, Frac: sl.n}
	case l.Algorithm == algorithms.SlidingWindowLog:
	default:
		st = algorithms.State{At: sl.at, Count: sl.n, Previous: sl.previous}
	}
	if sl.extra != nil {
		st.Log, st.Shares = sl.extra.log, sl.extra.shares
	}
	return st
}

func packState(l algorithms.Limit, st algorithms.State, sl *slot) {
	sl.at, sl.n, sl.previous, sl.extra = st.At, st.Count, st.Previous, nil
	if l.Algorithm.IsBucket() {
		sl.n = st.Frac
	}
	if len(st.Log) > 0 || len(st.Shares) > 0 {
		sl.extra = &slotExtra{log: st.Log, shares: st.Shares}
	}
}

// update stores a new state in a bucket's slot (from get or find).
func (s *bucketStore) update(i uint32, id bucketKey, under algorithms.Limit, st algorithms.State) {
	l := id.limit
	sl := s.mutable(i)
	if id.policy != "" {
		l = under
		if s.targets[sl.under].key.limit != under {
			s.release(sl.under)
			sl.under = s.acquire(targetKey{limit: under})
		}
	}
	packState(l, st, sl)
	sl.expiresAt = l.ExpiresAtNanos(st)
	heap.Fix(byExpiry{s}, int(sl.heapIndex))
}

// create adds a bucket that is not in the store.
func (s *bucketStore) create(id bucketKey, under algorithms.Limit, st algorithms.State) {
	heap.Push(byExpiry{s}, s.insert(id, under, st))
}

// insert allocates a slot and indexes it; the caller puts it in the heap.
func (s *bucketStore) insert(id bucketKey, under algorithms.Limit, st algorithms.State) uint32 {
	var i uint32
	if n := len(s.freeSlots); n > 0 {
		i = s.freeSlots[n-1]
		s.freeSlots = s.freeSlots[:n-1]
	} else {
		if s.count == len(s.slabs)*slabSize {
			s.slabs = append(s.slabs, make([]slot, slabSize))
			s.shared = append(s.shared, false)
		}
		i = uint32(s.count)
	}
	sl := s.mutable(i)
	*sl = slot{key: id.key, target: s.acquire(targetOf(id))}
	l := id.limit
	if id.policy != "" {
		sl.under = s.acquire(targetKey{limit: under})
		l = under
	}
	packState(l, st, sl)
	sl.expiresAt = l.ExpiresAtNanos(st)
	s.count++
	if 2*s.count > len(s.table) {
		s.grow()
	}
	s.index(i)
	return i
}

func (s *bucketStore) index(i uint32) {
	sl := s.slot(i)
	mask := uint64(len(s.table) - 1)
	j := s.hash(sl.key, sl.target) & mask
	for s.table[j] != 0 {
		j = (j + 1) & mask
	}
	s.table[j] = i + 1
}

func (s *bucketStore) grow() {
	old := s.table
	s.table = make([]uint32, 2*len(old))
	for _, v := range old {
		if v != 0 {
			s.index(v - 1)
		}
	}
}

// remove deletes the slot's entry from the index (backward-shift deletion
// keeps every probe sequence unbroken), frees the slot and its targets.
func (s *bucketStore) remove(i uint32) {
	sl := s.slot(i)
	mask := uint64(len(s.table) - 1)
	pos := s.hash(sl.key, sl.target) & mask
	for s.table[pos] != i+1 {
		pos = (pos + 1) & mask
	}
	s.table[pos] = 0
	for j := (pos + 1) & mask; s.table[j] != 0; j = (j + 1) & mask {
		other := s.slot(s.table[j] - 1)
		home := s.hash(other.key, other.target) & mask
		// Move the entry back if its home is not cyclically in (pos, j].
		if (j > pos && (home <= pos || home > j)) || (j < pos && home <= pos && home > j) {
			s.table[pos], s.table[j] = s.table[j], 0
			pos = j
		}
	}
	s.release(sl.target)
	s.release(sl.under)
	*s.mutable(i) = slot{}
	s.freeSlots = append(s.freeSlots, i)
	s.count--
}

// expire deletes up to max buckets whose expiry is at or before now.
func (s *bucketStore) expire(now int64, max int) {
	for n := 0; n < max && len(s.expiry) > 0 && s.slot(s.expiry[0]).expiresAt <= now; n++ {
		s.remove(heap.Pop(byExpiry{s}).(uint32))
	}
}

// byExpiry is the heap of slot numbers, ordered by (expiry, key, policy,
// limit).
type byExpiry struct{ s *bucketStore }

func (h byExpiry) Len() int { return len(h.s.expiry) }
func (h byExpiry) Less(i, j int) bool {
	a, b := h.s.slot(h.s.expiry[i]), h.s.slot(h.s.expiry[j])
	if a.expiresAt != b.expiresAt {
		return a.expiresAt < b.expiresAt
	}
	ta, tb := h.s.targets[a.target].key, h.s.targets[b.target].key
	return bucketKey{key: a.key, policy: ta.policy, limit: ta.limit}.less(bucketKey{key: b.key, policy: tb.policy, limit: tb.limit})
}
func (h byExpiry) Swap(i, j int) {
	e := h.s.expiry
	e[i], e[j] = e[j], e[i]
	h.s.mutable(e[i]).heapIndex = int32(i)
	h.s.mutable(e[j]).heapIndex = int32(j)
}
func (h byExpiry) Push(x any) {
	i := x.(uint32)
	h.s.mutable(i).heapIndex = int32(len(h.s.expiry))
	h.s.expiry = append(h.s.expiry, i)
}
func (h byExpiry) Pop() any {
	e := h.s.expiry
	i := e[len(e)-1]
	h.s.expiry = e[:len(e)-1]
	return i
}

// add puts a bucket restored from a snapshot; call initHeap after the last.
func (s *bucketStore) add(id bucketKey, under algorithms.Limit, st algorithms.State) bool {
	if _, dup := s.find(id); dup {
		return false
	}
	i := s.insert(id, under, st)
	s.mutable(i).heapIndex = int32(len(s.expiry))
	s.expiry = append(s.expiry, i)
	return true
}

func (s *bucketStore) initHeap() { heap.Init(byExpiry{s}) }

// frozenBuckets is a snapshot's read-only view of the buckets.
type frozenBuckets struct {
	slabs   [][]slot
	targets []targetEntry
	count   int
}

// freeze returns the buckets as they are now. Later writes copy a slab
// before changing it, so the view never changes; the targets are copied,
// since IDs are released and reused.
func (s *bucketStore) freeze() frozenBuckets {
	for k := range s.shared {
		s.shared[k] = true
	}
	return frozenBuckets{slabs: slices.Clone(s.slabs), targets: slices.Clone(s.targets), count: s.count}
}

// eachSorted calls fn for every bucket in bucketKey order, stopping at the
// first error. It sorts 8-byte references to the slots rather than copies of
// the buckets, so a snapshot of millions of keys allocates megabytes, not
// the hundreds a copy would, and leaves the garbage collector (and the
// requests it would slow) alone.
func (f frozenBuckets) eachSorted(fn func(id bucketKey, l algorithms.Limit, st algorithms.State) error) error {
	type ref struct{ slab, slot uint32 }
	refs := make([]ref, 0, f.count)
	for i, slab := range f.slabs {
		for j := range slab {
			if slab[j].target != 0 {
				refs = append(refs, ref{uint32(i), uint32(j)})
			}
		}
	}
	idOf := func(r ref) bucketKey { return f.idOf(&f.slabs[r.slab][r.slot]) }
	slices.SortFunc(refs, func(a, b ref) int { return idOf(a).compare(idOf(b)) })
	for _, r := range refs {
		if err := f.visit(&f.slabs[r.slab][r.slot], fn); err != nil {
			return err
		}
	}
	return nil
}

// each calls fn for every bucket in the order of the slabs, stopping at the
// first error.
func (f frozenBuckets) each(fn func(id bucketKey, l algorithms.Limit, st algorithms.State) error) error {
	for _, slab := range f.slabs {
		for i := range slab {
			if slab[i].target == 0 {
				continue // a free slot
			}
			if err := f.visit(&slab[i], fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// idOf returns the key of the bucket in a used slot.
func (f frozenBuckets) idOf(sl *slot) bucketKey {
	t := f.targets[sl.target].key
	return bucketKey{key: sl.key, policy: t.policy, limit: t.limit}
}

// visit calls fn with the bucket in a used slot: its key, the limit its
// state is under, and the state.
func (f frozenBuckets) visit(sl *slot, fn func(id bucketKey, l algorithms.Limit, st algorithms.State) error) error {
	id := f.idOf(sl)
	l := id.limit
	if sl.under != 0 {
		l = f.targets[sl.under].key.limit
	}
	return fn(id, l, unpackState(l, sl))
}
