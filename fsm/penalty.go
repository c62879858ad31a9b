package fsm

import (
	"cmp"
	"errors"
	"strings"

	"github.com/limitnode/limitnode/contract"
)

// Penalties: a policy (or an Envoy domain's rate_limit) with a penalty
// blocks a key that it denies Denials times within Within. The denials are
// counted here, in log order, from each entry's cluster time: a key's count
// opens with its first denial and closes Within later (each entry's advance
// deletes the counts whose window has closed, in (end, owner, key) order),
// so every replica blocks the key at the same entry. Because a denial that
// counts must reach the log, such a denial is never repeated from a deny
// lease nor answered on the fast path (decide, probeDenied); once the key
// is blocked, its denials are the block's, which are.

// penaltyKey names what a count is of: a key under one policy or domain.
type penaltyKey struct {
	owner, key string
}

// penaltyCount is the denials of one key in the window that ends at
// endNanos, opened by the first denial's caller (its scope).
type penaltyCount struct {
	penaltyKey
	endNanos, count int64
	opener          string
	index           int // in the table's expiry heap
}

// penaltyTable is the counts, by key and by the end of their window, and
// how many each caller opened.
type penaltyTable struct {
	byKey    map[penaltyKey]*penaltyCount
	expiry   *orderedHeap[penaltyCount]
	byOpener perCaller
}

func newPenaltyTable() *penaltyTable {
	return &penaltyTable{byKey: make(map[penaltyKey]*penaltyCount), byOpener: perCaller{},
		// Counts by (end, owner, key).
		expiry: newOrderedHeap(func(a, b *penaltyCount) int {
			return cmp.Or(cmp.Compare(a.endNanos, b.endNanos), strings.Compare(a.owner, b.owner), strings.Compare(a.key, b.key))
		}, func(c *penaltyCount) *int { return &c.index }),
	}
}

// count adds a denial of k at now under p, by a request of scope, and
// reports whether it is the one that reaches p's number (the count is then
// closed). A key not counted yet is not counted while the table is full,
// or while scope opened its most counts (a named caller's bound,
// contract.MaxPenaltyCountersPerCaller).
func (t *penaltyTable) count(now int64, k penaltyKey, p *contract.Penalty, scope string) bool {
	c := t.byKey[k]
	if c != nil && c.endNanos <= now {
		t.remove(c)
		c = nil
	}
	if c == nil {
		if !t.mayOpen(scope) {
			return false
		}
		t.add(&penaltyCount{penaltyKey: k, endNanos: now + int64(p.Within), opener: scope})
		c = t.byKey[k]
	}
	c.count++
	if c.count < p.Denials {
		return false
	}
	t.remove(c)
	return true
}

// mayOpen reports whether a count may be opened for scope.
func (t *penaltyTable) mayOpen(scope string) bool {
	return len(t.byKey) < contract.MaxPenaltyCounters && !t.byOpener.full(scope, contract.MaxPenaltyCountersPerCaller)
}

func (t *penaltyTable) add(c *penaltyCount) {
	t.byKey[c.penaltyKey] = c
	t.expiry.add(c)
	t.byOpener.add(c.opener)
}

func (t *penaltyTable) remove(c *penaltyCount) {
	t.expiry.remove(c)
	delete(t.byKey, c.penaltyKey)
	t.byOpener.remove(c.opener)
}

// expire deletes up to limit counts whose window has closed by now.
func (t *penaltyTable) expire(now int64, limit int) {
	for c := t.expiry.first(); limit > 0 && c != nil && c.endNanos <= now; c, limit = t.expiry.first(), limit-1 {
		t.remove(c)
	}
}

// penalized reports whether a denial of targets, reported in checks,
// counts toward a penalty: one of its denying checks has one.
func penalized(targets []target, checks []CheckResult) bool {
	for i := range targets {
		if targets[i].penalty != nil && !targets[i].shadow && !checks[i].Decision.Allowed {
			return true
		}
	}
	return false
}

// penalize counts the denial in res, of a request of scope, of each
// denying target with a penalty, and blocks the keys whose count it
// completes; res says whose penalty it imposed.
func (f *FSM) penalize(now int64, targets []target, res *Result, scope string) {
	for i := range targets {
		t := &targets[i]
		if t.penalty == nil || t.shadow || res.Checks[i].Decision.Allowed {
			continue
		}
		owner := t.id.policy
		if !f.penalties.count(now, penaltyKey{owner: owner, key: t.id.key}, t.penalty, scope) {
			continue
		}
		until := now + int64(t.penalty.BlockFor)
		if b := f.blocks.active(t.id.key, now); b != nil && b.UntilNanos >= until {
			continue // blocked for longer already
		}
		if _, ok := f.blocks.put(contract.Block{Key: t.id.key, Reason: t.penalty.Reason(), SinceNanos: now, UntilNanos: until, Penalty: owner}); ok && res.Penalized == "" {
			res.Penalized = owner
		}
	}
}

// penaltyRecord is a count in a snapshot. Opener comes last: a snapshot
// written before it restores counts opened by no named caller.
type penaltyRecord struct {
	Owner, Key      string
	EndNanos, Count int64
	Opener          string
}

func (f *FSM) restorePenalty(rec *penaltyRecord) error {
	k := penaltyKey{owner: rec.Owner, key: rec.Key}
	switch {
	case !validBucketOwner(rec.Owner) || contract.ValidateKey(rec.Key) != nil:
		return errors.New("bad owner or key")
	case rec.Count < 1 || rec.Count >= contract.MaxPenaltyDenials || rec.EndNanos <= 0:
		return errors.New("count or end out of range")
	case f.penalties.byKey[k] != nil || !f.penalties.mayOpen(rec.Opener) || len(rec.Opener) > contract.MaxScopeBytes:
		return errors.New("repeated, or too many")
	}
	f.penalties.add(&penaltyCount{penaltyKey: k, endNanos: rec.EndNanos, count: rec.Count, opener: rec.Opener})
	return nil
}
