package topk

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

const (
	zipfKeys = 100_000
	zipfAdds = 1_000_000
	zipfS    = 1.1
)

// zipfTrace returns the names of zipfKeys keys and a fixed trace of
// zipfAdds indices into them, Zipf-distributed with exponent zipfS.
func zipfTrace(seed uint64, adds int) (keys []string, trace []int32) {
	keys = make([]string, zipfKeys)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), zipfS, 1, zipfKeys-1)
	trace = make([]int32, adds)
	for i := range trace {
		trace[i] = int32(z.Uint64())
	}
	return keys, trace
}

// checkGuarantee asserts what space-saving guarantees, given the exact
// counts, of all the merged items (all) and of the first 10 (top10):
//
//   - Count - Error <= true <= Count and 0 <= Error <= bound for every item;
//   - every key with true count > bound is in all;
//   - ranking: let T be the keys by true count descending. For a key x and
//     any y, Count(x) >= true(x) and Count(y) <= true(y) + Error(y) <=
//     true(y) + bound, so true(x) > true(y) + bound implies Count(x) >
//     Count(y). Hence if T[i]'s true count is more than bound below T[i-1]'s
//     and more than bound above T[i+1]'s, exactly i reported keys have a
//     greater Count and none an equal one: T[i] is reported at position i.
//     When all gaps among the true top 11 exceed bound, the reported top 10
//     are exactly the true top 10 in order. (The gap needed is bound, so
//     this asserts at least as much as "gaps of more than 2*bound".)
//
// It returns how many of the 10 positions the gaps let it assert.
func checkGuarantee(t *testing.T, all, top10 []Count, exact map[string]int64, bound int64) int {
	t.Helper()
	if !slices.Equal(top10, all[:min(10, len(all))]) {
		t.Errorf("Top(10) is not the first 10 of the full list")
	}
	got := make(map[string]bool, len(all))
	for _, c := range all {
		got[c.Key] = true
		tr := exact[c.Key]
		if c.Count-c.Error > tr || tr > c.Count || c.Error < 0 || c.Error > bound {
			t.Errorf("%q: Count %d, Error %d, true %d, bound %d", c.Key, c.Count, c.Error, tr, bound)
		}
	}
	ranked := make([]string, 0, len(exact))
	for k, n := range exact {
		if n > bound && !got[k] {
			t.Errorf("%q: true count %d > bound %d but not reported", k, n, bound)
		}
		ranked = append(ranked, k)
	}
	slices.SortFunc(ranked, func(a, b string) int {
		return cmp.Or(cmp.Compare(exact[b], exact[a]), cmp.Compare(a, b))
	})
	trueAt := func(i int) int64 {
		if i < len(ranked) {
			return exact[ranked[i]]
		}
		return 0
	}
	asserted, asserted2 := 0, 0
	for i := range min(10, len(ranked)) {
		above := i == 0 || trueAt(i-1)-trueAt(i) > bound
		below := trueAt(i)-trueAt(i+1) > bound
		if i == 0 || trueAt(i-1)-trueAt(i) > 2*bound {
			if trueAt(i)-trueAt(i+1) > 2*bound {
				asserted2++
			}
		}
		if !above || !below {
			continue
		}
		asserted++
		if i >= len(top10) || top10[i].Key != ranked[i] {
			t.Errorf("position %d: reported %v, want %q (true %d; neighbours %d, %d; bound %d)",
				i, top10, ranked[i], trueAt(i), trueAt(i-1), trueAt(i+1), bound)
		}
	}
	t.Logf("bound %d: positions asserted %d of 10 (%d with gaps > 2*bound); true top counts %d..%d",
		bound, asserted, asserted2, trueAt(0), trueAt(10))
	return asserted
}

// TestZipfGuarantee feeds a skewed trace into a Sketch and into a Window
// and checks them against exact counts with checkGuarantee.
func TestZipfGuarantee(t *testing.T) {
	keys, trace := zipfTrace(1, zipfAdds)
	const (
		k     = 1024
		slots = 6
		slot  = 10 * time.Second
		span  = 90 * time.Second
	)
	// A slot-aligned start; the trace is spread evenly over span.
	base := int64(1_700_000_000 * time.Second)
	at := func(i int) int64 { return base + int64(i)*int64(span)/int64(len(trace)) }
	now := base + int64(span) - 1 // the window is [base+30s, base+90s)

	tests := []struct {
		name string
		// run feeds the trace and returns the full list, the top 10, the
		// exact counts it should match, the total and the bound.
		run func(t *testing.T) (all, top10 []Count, exact map[string]int64, total, wantTotal, bound, wantBound int64)
		// minAsserted is how many top positions the gaps must let the
		// test check, so that it cannot pass vacuously. With this seed
		// every gap among the true top 11 exceeds bound (7 of them exceed
		// 2*bound), so the whole reported top 10 is asserted.
		minAsserted int
	}{
		{
			name: "sketch",
			run: func(t *testing.T) ([]Count, []Count, map[string]int64, int64, int64, int64, int64) {
				s := NewSketch(k)
				exact := make(map[string]int64)
				for _, ki := range trace {
					s.Add(keys[ki], 1)
					exact[keys[ki]]++
				}
				checkHeap(t, s)
				total := int64(len(trace))
				return s.Top(k), s.Top(10), exact, s.Total(), total, s.Total() / k, total / k
			},
			minAsserted: 10,
		},
		{
			name: "window",
			run: func(t *testing.T) ([]Count, []Count, map[string]int64, int64, int64, int64, int64) {
				w := NewWindow(k, slots, slot)
				exact := make(map[string]int64)
				slotTotals := make(map[int64]int64)
				for i, ki := range trace {
					ts := at(i)
					w.Add(ts, keys[ki], 1)
					if i%1000 == 0 {
						// Six slots back from the newest: dropped.
						w.Add(ts-int64(slots*slot), keys[ki], 1)
					}
					if ts >= now-int64(slots*slot)+1 {
						exact[keys[ki]]++
						slotTotals[ts/int64(slot)]++
					}
				}
				var wantTotal, wantBound int64
				for _, n := range slotTotals {
					wantTotal += n
					wantBound += n / k
				}
				if len(slotTotals) != slots {
					t.Fatalf("trace covers %d slots of the window, want %d", len(slotTotals), slots)
				}
				all, total, bound := w.Top(now, k*slots)
				top10, total10, bound10 := w.Top(now, 10)
				if total10 != total || bound10 != bound {
					t.Errorf("Top(now, 10) total, bound = %d, %d; Top(now, all) %d, %d", total10, bound10, total, bound)
				}
				return all, top10, exact, total, wantTotal, bound, wantBound
			},
			minAsserted: 10,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all, top10, exact, total, wantTotal, bound, wantBound := tt.run(t)
			if total != wantTotal || bound != wantBound {
				t.Fatalf("total, bound = %d, %d; want %d, %d", total, bound, wantTotal, wantBound)
			}
			if n := checkGuarantee(t, all, top10, exact, bound); n < tt.minAsserted {
				t.Errorf("the gaps allowed asserting only %d top positions, want >= %d", n, tt.minAsserted)
			}
		})
	}
}
