package topk

import (
	"slices"
	"testing"
	"time"
)

type add struct {
	key string
	n   int64
}

func addAll(s *Sketch, adds []add) {
	for _, a := range adds {
		s.Add(a.key, a.n)
	}
}

// fataler is what *testing.T and *rapid.T have in common.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkHeap fails unless the sketch's heap and index are consistent.
func checkHeap(t fataler, s *Sketch) {
	t.Helper()
	if len(s.heap) != len(s.slab) || len(s.index) != len(s.slab) || len(s.slab) > s.k {
		t.Fatalf("sizes: heap %d slab %d index %d k %d", len(s.heap), len(s.slab), len(s.index), s.k)
	}
	for p, i := range s.heap {
		if int(s.slab[i].pos) != p {
			t.Fatalf("slab[%d].pos = %d, want %d", i, s.slab[i].pos, p)
		}
		if p > 0 && s.less(p, (p-1)/2) {
			t.Fatalf("heap order broken at %d", p)
		}
	}
	for k, i := range s.index {
		if s.slab[i].key != k {
			t.Fatalf("index[%q] = %d holds %q", k, i, s.slab[i].key)
		}
	}
}

func TestSketch(t *testing.T) {
	tests := []struct {
		name  string
		k     int
		adds  []add
		n     int
		want  []Count
		total int64
	}{
		{
			name: "empty",
			k:    4, n: 10,
			want: nil,
		},
		{
			name:  "fewer keys than k are exact",
			k:     4,
			adds:  []add{{"a", 1}, {"b", 5}, {"a", 2}, {"c", 1}, {"b", 1}},
			n:     10,
			want:  []Count{{"b", 6, 0}, {"a", 3, 0}, {"c", 1, 0}},
			total: 10,
		},
		{
			name:  "exactly k keys are exact",
			k:     3,
			adds:  []add{{"x", 7}, {"y", 2}, {"z", 4}, {"y", 1}},
			n:     3,
			want:  []Count{{"x", 7, 0}, {"z", 4, 0}, {"y", 3, 0}},
			total: 14,
		},
		{
			name:  "n <= 0 is ignored",
			k:     2,
			adds:  []add{{"a", 0}, {"b", -3}, {"a", 2}},
			n:     5,
			want:  []Count{{"a", 2, 0}},
			total: 2,
		},
		{
			name: "eviction replaces the minimum and inherits its count as Error",
			k:    2,
			adds: []add{{"a", 3}, {"b", 1}, {"c", 2}},
			n:    5,
			// b (1) is the least: c takes its counter with 1+2, Error 1.
			want:  []Count{{"a", 3, 0}, {"c", 3, 1}},
			total: 6,
		},
		{
			name: "evicted key comes back with the new minimum as Error",
			k:    2,
			adds: []add{{"a", 10}, {"b", 1}, {"c", 2}, {"b", 1}},
			n:    5,
			// c replaces b (count 3, Error 1); b replaces c (count 4, Error 3).
			want:  []Count{{"a", 10, 0}, {"b", 4, 3}},
			total: 14,
		},
		{
			name:  "k = 1 keeps the last key with everything as count",
			k:     1,
			adds:  []add{{"a", 2}, {"b", 3}, {"c", 1}},
			n:     1,
			want:  []Count{{"c", 6, 5}},
			total: 6,
		},
		{
			name:  "ties order by key ascending",
			k:     8,
			adds:  []add{{"d", 2}, {"b", 2}, {"c", 5}, {"a", 2}, {"e", 1}},
			n:     10,
			want:  []Count{{"c", 5, 0}, {"a", 2, 0}, {"b", 2, 0}, {"d", 2, 0}, {"e", 1, 0}},
			total: 12,
		},
		{
			name:  "truncation keeps the first n",
			k:     8,
			adds:  []add{{"d", 2}, {"b", 2}, {"c", 5}, {"a", 2}, {"e", 1}},
			n:     2,
			want:  []Count{{"c", 5, 0}, {"a", 2, 0}},
			total: 12,
		},
		{
			name:  "n = 0 returns nothing",
			k:     8,
			adds:  []add{{"a", 1}},
			n:     0,
			want:  nil,
			total: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSketch(tt.k)
			addAll(s, tt.adds)
			checkHeap(t, s)
			if got := s.Top(tt.n); !slices.Equal(got, tt.want) {
				t.Errorf("Top(%d) = %v, want %v", tt.n, got, tt.want)
			}
			if got := s.Total(); got != tt.total {
				t.Errorf("Total() = %d, want %d", got, tt.total)
			}
		})
	}
}

func TestSketchReset(t *testing.T) {
	tests := []struct {
		name   string
		k      int
		before []add
		after  []add
		want   []Count
	}{
		{
			name:   "empty after reset",
			k:      2,
			before: []add{{"a", 4}, {"b", 1}, {"c", 9}},
			want:   nil,
		},
		{
			name:   "no stale keys, counts or errors",
			k:      2,
			before: []add{{"a", 4}, {"b", 1}, {"c", 9}},
			after:  []add{{"b", 2}, {"d", 1}},
			want:   []Count{{"b", 2, 0}, {"d", 1, 0}},
		},
		{
			name:   "full again evicts afresh",
			k:      2,
			before: []add{{"a", 4}, {"b", 1}, {"c", 9}},
			after:  []add{{"x", 1}, {"y", 2}, {"z", 1}},
			want:   []Count{{"y", 2, 0}, {"z", 2, 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSketch(tt.k)
			addAll(s, tt.before)
			slab, heap := cap(s.slab), cap(s.heap)
			s.Reset()
			if s.Total() != 0 || s.Top(10) != nil {
				t.Fatalf("after Reset: Total %d, Top %v", s.Total(), s.Top(10))
			}
			addAll(s, tt.after)
			checkHeap(t, s)
			if got := s.Top(10); !slices.Equal(got, tt.want) {
				t.Errorf("Top = %v, want %v", got, tt.want)
			}
			if cap(s.slab) != slab || cap(s.heap) != heap {
				t.Errorf("Reset did not keep the memory")
			}
		})
	}
}

func TestNewPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"sketch k=0", func() { NewSketch(0) }},
		{"sketch k<0", func() { NewSketch(-1) }},
		{"window k=0", func() { NewWindow(0, 6, time.Second) }},
		{"window slots=0", func() { NewWindow(4, 0, time.Second) }},
		{"window slot=0", func() { NewWindow(4, 6, 0) }},
		{"window slot<0", func() { NewWindow(4, 6, -time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			tt.f()
		})
	}
}

type timedAdd struct {
	at  int64
	key string
	n   int64
}

func TestWindow(t *testing.T) {
	tests := []struct {
		name     string
		k, slots int
		slot     time.Duration
		adds     []timedAdd
		now      int64
		n        int
		want     []Count
		total    int64
		bound    int64
	}{
		{
			name: "empty",
			k:    2, slots: 3, slot: 10,
			now: 100, n: 10,
		},
		{
			name: "sums a key over slots",
			k:    4, slots: 3, slot: 10,
			adds: []timedAdd{{0, "a", 1}, {9, "a", 2}, {10, "a", 3}, {25, "b", 4}, {29, "a", 1}},
			now:  29, n: 10,
			want:  []Count{{"a", 7, 0}, {"b", 4, 0}},
			total: 11,
			bound: 0 + 0 + 1,
		},
		{
			name: "slots are aligned to multiples of slot",
			k:    4, slots: 2, slot: 10,
			// now 35: slots [20,30) and [30,40); 19 is in slot [10,20).
			adds: []timedAdd{{19, "old", 5}, {20, "a", 1}, {35, "b", 2}},
			now:  35, n: 10,
			want:  []Count{{"b", 2, 0}, {"a", 1, 0}},
			total: 3,
		},
		{
			name: "slots after now's are left out",
			k:    4, slots: 3, slot: 10,
			adds: []timedAdd{{5, "a", 1}, {15, "b", 2}, {25, "c", 3}},
			now:  19, n: 10,
			want:  []Count{{"b", 2, 0}, {"a", 1, 0}},
			total: 3,
		},
		{
			name: "a time older than the window is dropped",
			k:    4, slots: 3, slot: 10,
			// The newest slot is [50,60): the window of it starts at 30.
			adds: []timedAdd{{55, "a", 1}, {29, "old", 9}, {30, "b", 2}, {-100, "old", 9}},
			now:  59, n: 10,
			want:  []Count{{"b", 2, 0}, {"a", 1, 0}},
			total: 3,
		},
		{
			name: "a newer slot recycles the oldest",
			k:    4, slots: 2, slot: 10,
			adds: []timedAdd{{0, "a", 5}, {10, "b", 1}, {20, "c", 2}, {31, "d", 3}, {45, "e", 1}},
			// [40,50) took [20,30)'s position, [30,40) took [10,20)'s.
			now: 45, n: 10,
			want:  []Count{{"d", 3, 0}, {"e", 1, 0}},
			total: 4,
		},
		{
			name: "a recycled position forgets its old slot",
			k:    4, slots: 2, slot: 10,
			adds: []timedAdd{{0, "a", 5}, {20, "b", 1}},
			// [20,30) took [0,10)'s position; the window of now=15 is
			// [0,20) but [0,10) is gone.
			now: 15, n: 10,
			want: nil,
		},
		{
			name: "negative times use floor slots",
			k:    4, slots: 2, slot: 10,
			adds: []timedAdd{{-11, "a", 1}, {-10, "b", 2}, {-1, "c", 3}},
			// now -1: slots [-20,-10) and [-10,0).
			now: -1, n: 10,
			want:  []Count{{"c", 3, 0}, {"b", 2, 0}, {"a", 1, 0}},
			total: 6,
			bound: 1, // slot totals 1 and 5: 1/4 + 5/4
		},
		{
			name: "an untracked key gets a full slot's minimum as count and error",
			k:    1, slots: 2, slot: 10,
			adds: []timedAdd{{0, "a", 5}, {10, "b", 3}},
			now:  15, n: 10,
			// a: 5 + 3 (untracked in the full slot 2), Error 3;
			// b: 5 + 3, Error 5. Ties order by key.
			want:  []Count{{"a", 8, 3}, {"b", 8, 5}},
			total: 8,
			bound: 5/1 + 3/1,
		},
		{
			name: "a slot that is not full adds nothing for untracked keys",
			k:    2, slots: 2, slot: 10,
			adds: []timedAdd{{0, "a", 5}, {10, "b", 3}},
			now:  15, n: 10,
			want:  []Count{{"a", 5, 0}, {"b", 3, 0}},
			total: 8,
			bound: 5/2 + 3/2,
		},
		{
			name: "per-slot errors add up",
			k:    2, slots: 2, slot: 10,
			adds: []timedAdd{
				{0, "a", 4}, {1, "b", 1}, {2, "c", 1}, // slot 1: a 4, c 2 (Error 1)
				{10, "c", 6}, {11, "d", 2}, {12, "e", 1}, // slot 2: c 6, e 3 (Error 2)
			},
			now: 19, n: 10,
			// a: 4 + 3 (untracked, slot 2 full) = 7, Error 3.
			// c: 2 + 6 = 8, Error 1.
			// e: 2 (untracked, slot 1 full) + 3 = 5, Error 2 + 2.
			want:  []Count{{"c", 8, 1}, {"a", 7, 3}, {"e", 5, 4}},
			total: 15,
			bound: 6/2 + 9/2,
		},
		{
			name: "truncation",
			k:    4, slots: 2, slot: 10,
			adds: []timedAdd{{0, "a", 1}, {1, "b", 3}, {12, "c", 2}, {13, "a", 1}},
			now:  13, n: 2,
			want:  []Count{{"b", 3, 0}, {"a", 2, 0}},
			total: 7,
			bound: 1 + 0,
		},
		{
			name: "n <= 0 ignored in adds, Top(0) returns totals only",
			k:    4, slots: 2, slot: 10,
			adds: []timedAdd{{0, "a", 4}, {1, "b", 0}, {2, "c", -1}},
			now:  5, n: 0,
			want:  nil,
			total: 4,
			bound: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWindow(tt.k, tt.slots, tt.slot)
			for _, a := range tt.adds {
				w.Add(a.at, a.key, a.n)
			}
			top, total, bound := w.Top(tt.now, tt.n)
			if !slices.Equal(top, tt.want) {
				t.Errorf("top = %v, want %v", top, tt.want)
			}
			if total != tt.total || bound != tt.bound {
				t.Errorf("total, bound = %d, %d; want %d, %d", total, bound, tt.total, tt.bound)
			}
		})
	}
}

func TestWindowLargeTimes(t *testing.T) {
	tests := []struct {
		name string
		slot time.Duration
		at   []int64
		now  int64
		want int64
	}{
		{"max int64", 1, []int64{1<<63 - 1, 1<<63 - 2}, 1<<63 - 1, 2},
		{"min int64", 1, []int64{-1 << 63, -1<<63 + 1}, -1<<63 + 1, 2},
		{"both ends", 1, []int64{-1 << 63, 1<<63 - 1, -1 << 63}, 1<<63 - 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWindow(2, 3, tt.slot)
			for _, at := range tt.at {
				w.Add(at, "k", 1)
			}
			if _, total, _ := w.Top(tt.now, 1); total != tt.want {
				t.Errorf("total = %d, want %d", total, tt.want)
			}
		})
	}
}

// BenchmarkSketchAdd adds keys to a Sketch of 1024 counters: a Zipf trace
// over 100,000 keys (mostly hits, some evictions), and a stream of
// distinct keys (an eviction every Add).
func BenchmarkSketchAdd(b *testing.B) {
	keys, trace := zipfTrace(2, 1<<20)
	distinct := make([]int32, len(keys))
	for i := range distinct {
		distinct[i] = int32(i)
	}
	for _, bb := range []struct {
		name  string
		trace []int32
	}{{"zipf", trace}, {"distinct", distinct}} {
		b.Run(bb.name, func(b *testing.B) {
			s := NewSketch(1024)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.Add(keys[bb.trace[i]], 1)
				if i++; i == len(bb.trace) {
					i = 0
				}
			}
		})
	}
}
