package topk

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var smallKeys = func() []string {
	k := make([]string, 16)
	for i := range k {
		k[i] = string(rune('a' + i))
	}
	return k
}()

// TestSketchProperty: for random small streams, every tracked item has
// Count - Error <= true <= Count and Error <= total/k, and every key with
// true count > total/k is tracked.
func TestSketchProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 8).Draw(t, "k")
		nkeys := rapid.IntRange(1, len(smallKeys)).Draw(t, "keys")
		s := NewSketch(k)
		exact := make(map[string]int64)
		var total int64
		for range rapid.IntRange(0, 200).Draw(t, "adds") {
			key := smallKeys[rapid.IntRange(0, nkeys-1).Draw(t, "key")]
			n := rapid.Int64Range(-1, 5).Draw(t, "n")
			s.Add(key, n)
			if n > 0 {
				exact[key] += n
				total += n
			}
		}
		checkHeap(t, s)
		if s.Total() != total {
			t.Fatalf("Total() = %d, want %d", s.Total(), total)
		}
		bound := total / int64(k)
		all := s.Top(k)
		checkItems(t, all, exact, bound)
		if n := rapid.IntRange(0, k+1).Draw(t, "top"); !slices.Equal(s.Top(n), all[:min(n, len(all))]) {
			t.Fatalf("Top(%d) = %v is not a prefix of %v", n, s.Top(n), all)
		}
	})
}

// TestWindowProperty: the same for a Window over random, unordered times
// (including negative ones), against a model of what it keeps: a time
// `slots` or more slots older than the newest slot added is dropped.
// Queried at or after the newest slot, nothing recycled is in the window.
func TestWindowProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 4).Draw(t, "k")
		slots := rapid.IntRange(1, 4).Draw(t, "slots")
		slot := rapid.Int64Range(1, 5).Draw(t, "slot")
		nkeys := rapid.IntRange(1, len(smallKeys)).Draw(t, "keys")
		w := NewWindow(k, slots, time.Duration(slot))
		type event struct {
			j   int64
			key string
			n   int64
		}
		var kept []event
		var newest int64
		started := false
		for range rapid.IntRange(0, 200).Draw(t, "adds") {
			at := rapid.Int64Range(-40, 40).Draw(t, "at")
			key := smallKeys[rapid.IntRange(0, nkeys-1).Draw(t, "key")]
			n := rapid.Int64Range(0, 5).Draw(t, "n")
			w.Add(at, key, n)
			j := floorDiv(at, slot)
			if n <= 0 || (started && j <= newest-int64(slots)) {
				continue
			}
			if !started || j > newest {
				newest, started = j, true
			}
			kept = append(kept, event{j, key, n})
		}
		last := newest + rapid.Int64Range(0, int64(slots)+1).Draw(t, "after")
		now := last*slot + rapid.Int64Range(0, slot-1).Draw(t, "offset")
		exact := make(map[string]int64)
		slotTotals := make(map[int64]int64)
		for _, e := range kept {
			if e.j > last-int64(slots) && e.j <= last {
				exact[e.key] += e.n
				slotTotals[e.j] += e.n
			}
		}
		var wantTotal, wantBound int64
		for _, n := range slotTotals {
			wantTotal += n
			wantBound += n / int64(k)
		}
		all, total, bound := w.Top(now, k*slots)
		if total != wantTotal || bound != wantBound {
			t.Fatalf("total, bound = %d, %d; want %d, %d", total, bound, wantTotal, wantBound)
		}
		checkItems(t, all, exact, bound)
		n := rapid.IntRange(0, k*slots+1).Draw(t, "top")
		if top, _, _ := w.Top(now, n); !slices.Equal(top, all[:min(n, len(all))]) {
			t.Fatalf("Top(%d) = %v is not a prefix of %v", n, top, all)
		}
	})
}

// checkItems asserts Count - Error <= true <= Count and 0 <= Error <=
// bound for every item, the order, and that every key with true count >
// bound is present.
func checkItems(t *rapid.T, all []Count, exact map[string]int64, bound int64) {
	got := make(map[string]bool, len(all))
	for i, c := range all {
		got[c.Key] = true
		tr := exact[c.Key]
		if c.Count-c.Error > tr || tr > c.Count || c.Error < 0 || c.Error > bound {
			t.Fatalf("%q: Count %d, Error %d, true %d, bound %d", c.Key, c.Count, c.Error, tr, bound)
		}
		if i > 0 {
			p := all[i-1]
			if p.Count < c.Count || (p.Count == c.Count && p.Key >= c.Key) {
				t.Fatalf("out of order: %v before %v", p, c)
			}
		}
	}
	for key, n := range exact {
		if n > bound && !got[key] {
			t.Fatalf("%q: true count %d > bound %d but missing from %v", key, n, bound, all)
		}
	}
}
