package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"pgregory.net/rapid"
)

// TestBucketStoreMatchesAMap drives the store (slabs, open addressing with
// backward-shift deletion, interned targets, expiry heap) and a plain map
// with the same random creates, updates and expiries, and compares them.
func TestBucketStoreMatchesAMap(t *testing.T) {
	t.Parallel()
	limits := []algorithms.Limit{
		{Rate: 10, Period: time.Second, Burst: 10},
		{Algorithm: algorithms.FixedWindow, Rate: 5, Period: time.Second},
		{Algorithm: algorithms.SlidingWindowLog, Rate: 5, Period: time.Second},
	}
	rapid.Check(t, func(t *rapid.T) {
		s := newBucketStore()
		type entry struct {
			state algorithms.State
			under algorithms.Limit
		}
		model := map[bucketKey]entry{}
		now := t0
		for range rapid.IntRange(1, 300).Draw(t, "ops") {
			now += rapid.Int64Range(0, int64(300*time.Millisecond)).Draw(t, "gap")
			id := bucketKey{key: fmt.Sprint(rapid.IntRange(0, 40).Draw(t, "key"))}
			l := limits[rapid.IntRange(0, len(limits)-1).Draw(t, "limit")]
			if rapid.Bool().Draw(t, "policy") {
				id.policy = "p"
			} else {
				id.limit = l
			}
			if rapid.IntRange(0, 4).Draw(t, "op") == 0 {
				s.expire(now, 1<<30)
				for k, e := range model {
					lim := k.limit
					if k.policy != "" {
						lim = e.under
					}
					if lim.ExpiresAtNanos(e.state) <= now {
						delete(model, k)
					}
				}
			} else {
				_, st := algorithms.Decide(l, algorithms.State{}, now, 1)
				if i, ok := s.find(id); ok {
					s.update(i, id, l, st)
				} else {
					s.create(id, l, st)
				}
				model[id] = entry{st, l}
			}
			if s.len() != len(model) {
				t.Fatalf("%d buckets, the model has %d", s.len(), len(model))
			}
			for k, e := range model {
				_, st, lim, ok := s.get(k)
				if !ok || !st.Equal(e.state) || (k.policy != "" && lim != e.under) {
					t.Fatalf("bucket %+v: found=%v state %+v under %+v, want %+v under %+v", k, ok, st, lim, e.state, e.under)
				}
			}
		}
	})
}
