package fsm

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// The block list: keys every request on which is denied until a cluster
// time, without touching their counters. An operator puts a block
// (CommandPutBlock) and lifts it (CommandDeleteBlock); a policy's penalty
// imposes one from within an allow entry. Blocks end by cluster time like
// everything else: each entry's advance deletes the ones that have ended, in
// (end, key) order, so every replica deletes the same ones at the same index.
//
// A block denies what counts on its key under any limit or policy: the key
// a check is decided on (given, or made by a policy's template), or the
// counter key of an Envoy rate limit service descriptor that a limit
// applies to.

// BlockCommand is the body of CommandPutBlock (every field) and
// CommandDeleteBlock (NowNanos and Key).
type BlockCommand struct {
	NowNanos int64
	Key      string
	Reason   string
	TTLNanos int64
}

// BlockResult answers the block commands: the block put, or the one
// lifted.
type BlockResult struct {
	Block contract.Block
	// Shortened: a put replaced a block that would have ended later, so it
	// gave capacity back (see Raised).
	Shortened bool
}

// block is one entry of the table.
type block struct {
	contract.Block
	index int // in the table's expiry heap
}

// blockTable is the block list: by key, and a heap by (end, key).
type blockTable struct {
	byKey  map[string]*block
	expiry *orderedHeap[block]
}

func newBlockTable() *blockTable {
	return &blockTable{byKey: make(map[string]*block), expiry: newOrderedHeap(func(a, b *block) int {
		return cmp.Or(cmp.Compare(a.UntilNanos, b.UntilNanos), strings.Compare(a.Key, b.Key))
	}, func(b *block) *int { return &b.index })}
}

// active returns the block of key that has not ended by now, or nil.
func (t *blockTable) active(key string, now int64) *block {
	if len(t.byKey) == 0 {
		return nil
	}
	if b := t.byKey[key]; b != nil && b.UntilNanos > now {
		return b
	}
	return nil
}

// put blocks b.Key until b.UntilNanos, replacing a block it has, and
// returns the block it replaced (nil for none); false when the table is
// full and b.Key holds none.
func (t *blockTable) put(b contract.Block) (old *contract.Block, ok bool) {
	if e := t.byKey[b.Key]; e != nil {
		prev := e.Block
		e.Block = b
		t.expiry.fix(e)
		return &prev, true
	}
	if len(t.byKey) >= contract.MaxBlocks {
		return nil, false
	}
	e := &block{Block: b}
	t.byKey[b.Key] = e
	t.expiry.add(e)
	return nil, true
}

// remove lifts the block of key, returning it; false when there is none.
func (t *blockTable) remove(key string) (contract.Block, bool) {
	e := t.byKey[key]
	if e == nil {
		return contract.Block{}, false
	}
	t.expiry.remove(e)
	delete(t.byKey, key)
	return e.Block, true
}

// expire deletes up to limit blocks that have ended by now.
func (t *blockTable) expire(now int64, limit int) {
	for e := t.expiry.first(); limit > 0 && e != nil && e.UntilNanos <= now; e, limit = t.expiry.first(), limit-1 {
		t.expiry.remove(e)
		delete(t.byKey, e.Key)
	}
}

// sorted returns the blocks that have not ended by now, sorted by key.
func (t *blockTable) sorted(now int64) []contract.Block {
	out := make([]contract.Block, 0, len(t.byKey))
	for _, e := range t.byKey {
		if e.UntilNanos > now {
			out = append(out, e.Block)
		}
	}
	slices.SortFunc(out, func(a, b contract.Block) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// validateBlockCommand checks a CommandPutBlock body as the contract checks
// a logged one (BlockRequest.ValidateEntry).
func validateBlockCommand(c *BlockCommand) *contract.Error {
	req := contract.BlockRequest{Key: c.Key, Reason: c.Reason, TTL: time.Duration(c.TTLNanos)}
	return req.ValidateEntry()
}

// putBlock applies CommandPutBlock at the command's time.
func (f *FSM) putBlock(cmd *BlockCommand) any {
	if err := validateBlockCommand(cmd); err != nil {
		return err
	}
	now := f.advance(cmd.NowNanos)
	b := contract.Block{Key: cmd.Key, Reason: cmd.Reason, SinceNanos: now, UntilNanos: now + cmd.TTLNanos}
	old, ok := f.blocks.put(b)
	if !ok {
		return contract.Exhausted("the cluster holds its maximum of %d blocked keys", contract.MaxBlocks)
	}
	return &BlockResult{Block: b, Shortened: old != nil && old.UntilNanos > now && old.UntilNanos > b.UntilNanos}
}

// deleteBlock applies CommandDeleteBlock: a block that has ended is gone
// already.
func (f *FSM) deleteBlock(cmd *BlockCommand) any {
	if err := contract.ValidateKey(cmd.Key); err != nil {
		return err
	}
	now := f.advance(cmd.NowNanos)
	if f.blocks.active(cmd.Key, now) == nil {
		return contract.NotFound("key", "the key %q is not blocked", cmd.Key)
	}
	b, _ := f.blocks.remove(cmd.Key)
	return &BlockResult{Block: b}
}

// Blocks returns up to limit blocks whose keys sort after after, sorted, as
// of cluster time atNanos (never before the latest applied), and the key to
// continue after ("" at the end).
func (f *FSM) Blocks(after string, limit int, atNanos int64) (page []contract.Block, next string) {
	f.mu.Lock()
	all := f.blocks.sorted(max(atNanos, f.nowNanos))
	f.mu.Unlock()
	i, _ := slices.BinarySearchFunc(all, after, func(b contract.Block, key string) int { return strings.Compare(b.Key, key) })
	if i < len(all) && all[i].Key == after {
		i++
	}
	page = all[i:]
	if len(page) > limit {
		page, next = page[:limit], page[limit-1].Key
	}
	return page, next
}

// BlockCount returns how many keys are blocked as of cluster time atNanos,
// and how many of those a penalty blocked.
func (f *FSM) BlockCount(atNanos int64) (blocked, byPenalty int) {
	s := f.BlockSummary(0, atNanos)
	return s.Blocked, s.ByPenalty
}

// BlockSummary returns the block list as of cluster time atNanos (never
// before the latest applied) at a glance, with up to latest of the blocks
// that began last (ties by key).
func (f *FSM) BlockSummary(latest int, atNanos int64) contract.BlockSummary {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := max(atNanos, f.nowNanos)
	out := contract.BlockSummary{AtNanos: now}
	for _, e := range f.blocks.byKey {
		if e.UntilNanos <= now {
			continue
		}
		out.Blocked++
		if e.Penalty != "" {
			out.ByPenalty++
		}
		if latest > 0 {
			out.Latest = append(out.Latest, e.Block)
		}
	}
	slices.SortFunc(out.Latest, func(a, b contract.Block) int {
		return cmp.Or(cmp.Compare(b.SinceNanos, a.SinceNanos), strings.Compare(a.Key, b.Key))
	})
	out.Latest = out.Latest[:min(len(out.Latest), latest)]
	return out
}

// blockedTarget returns the first of targets whose key is blocked at now,
// and its block; -1 when none is.
func (f *FSM) blockedTarget(now int64, targets []target) (int, *block) {
	if len(f.blocks.byKey) == 0 {
		return -1, nil
	}
	for i := range targets {
		if b := f.blocks.active(targets[i].id.key, now); b != nil {
			return i, b
		}
	}
	return -1, nil
}

// blockedResult is the denial of a request whose target i is blocked by b:
// nothing is consumed; every check is reported as it stands, and each one
// blocked as denied until its block ends (its limit may deny longer). It
// stays denied at least until the last of its blocks ends, which is what
// it may be repeated for (Result.DenyForNanos), unless it waits by
// reservation.
func (f *FSM) blockedResult(now int64, req *Request, targets []target, i int, b *block) Result {
	res := Result{Checks: make([]CheckResult, len(targets)), Blocked: &contract.BlockedCheck{Check: i, Block: b.Block}}
	var longest int64
	for j := range targets {
		t := &targets[j]
		d, _ := algorithms.Decide(*t.limit, t.state, now, 0)
		if bj := f.blocks.active(t.id.key, now); bj != nil {
			left := bj.UntilNanos - now
			d.Allowed, d.Remaining = false, 0
			d.RetryAfter = time.Duration(left)
			d.ResetAfter, d.RefillAfter = max(d.ResetAfter, time.Duration(left)), max(d.RefillAfter, time.Duration(left))
			longest = max(longest, left)
		}
		res.Checks[j] = CheckResult{Decision: d, PeriodNanos: int64(t.limit.Period), Key: t.key, Shadow: t.shadow, Rate: t.limit.Rate}
	}
	res.DenyAtNanos = now
	res.DeniedBy = f.deniedBy(targets, res.Checks, i, b)
	if req.MaxWait == 0 {
		res.DenyForNanos = longest
	}
	return res
}
