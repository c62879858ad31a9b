package fsm

import (
	"container/heap"
	"slices"
	"strings"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// Keys, for operators: a key's state under every limit (read, consuming
// nothing), a listing of the live keys, and CommandResetKey, which deletes
// every bucket of one key through the log, so that every replica resets it
// at one index.

// resetKey deletes every bucket of key; a *contract.Error with
// CodeNotFound when it holds none. A bucket with outstanding shares keeps
// them charged (algorithms.Restart), since their holders may still spend
// them.
func (f *FSM) resetKey(key string) any {
	slots := f.buckets.bucketsOf(key)
	if len(slots) == 0 {
		return contract.NotFound("key", "the key %q holds no state", key)
	}
	for _, i := range slots {
		sl := f.buckets.slot(i)
		l := f.buckets.limitOf(sl)
		restarted := algorithms.Restart(l, unpackState(l, sl), f.nowNanos)
		if restarted.Shares == nil {
			f.buckets.delete(i)
			continue
		}
		t := f.buckets.targets[sl.target].key
		f.buckets.update(i, bucketKey{key: key, policy: t.policy, limit: t.limit}, l, restarted)
	}
	f.settles.forfeitRefunds(key)
	return &ResetResult{Buckets: len(slots)}
}

// ResetResult answers CommandResetKey: how many buckets it deleted.
type ResetResult struct {
	Buckets int
}

// KeyState returns what the state holds of key, as of cluster time atNanos
// (never before the latest applied), or false when it holds nothing.
func (f *FSM) KeyState(key string, atNanos int64) (contract.KeyState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := max(atNanos, f.nowNanos)
	out := contract.KeyState{Key: key}
	for _, i := range f.buckets.bucketsOf(key) {
		sl := f.buckets.slot(i)
		owner := f.buckets.targets[sl.target].key.policy
		l := f.buckets.limitOf(sl)
		d, _ := algorithms.Decide(l, unpackState(l, sl), now, 0)
		out.Limits = append(out.Limits, contract.KeyLimit{Owner: owner, Limit: l, Decision: d})
	}
	sortKeyLimits(out.Limits)
	return out, len(out.Limits) > 0
}

// KeysPage returns up to limit keys that start with prefix and sort after
// after, in order, with their state as KeyState gives it, and the key to
// continue after ("" at the end). It walks every live bucket, outside the
// lock, on the state frozen as a snapshot freezes it: for operators, not
// for a hot path.
func (f *FSM) KeysPage(prefix, after string, limit int, atNanos int64) (page []contract.KeyState, next string) {
	f.mu.Lock()
	frozen := f.buckets.freeze()
	now := max(atNanos, f.nowNanos)
	f.mu.Unlock()

	// The limit+1 smallest keys, to know whether another page follows.
	keys := &largestFirst{}
	seen := map[string]bool{}
	_ = frozen.each(func(id bucketKey, _ algorithms.Limit, _ algorithms.State) error {
		if !strings.HasPrefix(id.key, prefix) || id.key <= after || seen[id.key] {
			return nil
		}
		if keys.Len() > limit && id.key >= (*keys)[0] {
			return nil
		}
		seen[id.key] = true
		heap.Push(keys, id.key)
		if keys.Len() > limit+1 {
			delete(seen, heap.Pop(keys).(string))
		}
		return nil
	})
	chosen := slices.Sorted(slices.Values(*keys))
	if len(chosen) > limit {
		chosen, next = chosen[:limit], chosen[limit-1]
	}
	states := make(map[string]*contract.KeyState, len(chosen))
	for _, k := range chosen {
		page = append(page, contract.KeyState{Key: k})
	}
	for i := range page {
		states[page[i].Key] = &page[i]
	}
	_ = frozen.each(func(id bucketKey, l algorithms.Limit, st algorithms.State) error {
		if ks := states[id.key]; ks != nil {
			d, _ := algorithms.Decide(l, st, now, 0)
			ks.Limits = append(ks.Limits, contract.KeyLimit{Owner: id.policy, Limit: l, Decision: d})
		}
		return nil
	})
	for i := range page {
		sortKeyLimits(page[i].Limits)
	}
	return page, next
}

// sortKeyLimits orders a key's limits by owner, then limit, so that every
// node shows them alike.
func sortKeyLimits(limits []contract.KeyLimit) {
	slices.SortFunc(limits, func(a, b contract.KeyLimit) int {
		return bucketKey{policy: a.Owner, limit: a.Limit}.compare(bucketKey{policy: b.Owner, limit: b.Limit})
	})
}

// largestFirst is a max-heap of keys.
type largestFirst []string

func (h largestFirst) Len() int           { return len(h) }
func (h largestFirst) Less(i, j int) bool { return h[i] > h[j] }
func (h largestFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *largestFirst) Push(x any)        { *h = append(*h, x.(string)) }
func (h *largestFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
