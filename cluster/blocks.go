package cluster

import (
	"context"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// PutBlock blocks req.Key for req.TTL of cluster time, through the log:
// from the entry on, every node denies each request that counts on the key,
// without touching its counters, until the block ends. It is acknowledged
// once the local shares granted before it, which could still admit the key
// on the nodes that hold them, have ended (as a policy change waits them
// out), so from then on no node admits the key. A block already on the key
// is replaced; replacing it with one that ends sooner gives capacity back,
// which the same wait covers for the deny leases.
func (n *Node) PutBlock(ctx context.Context, req contract.BlockRequest) (contract.Block, error) {
	if err := req.Validate(); err != nil {
		return contract.Block{}, err
	}
	r, err := commandOnLeader[fsm.BlockResult](ctx, n, fsm.CommandPutBlock, &fsm.BlockCommand{Key: req.Key, Reason: req.Reason, TTLNanos: int64(req.TTL)})
	if err != nil {
		return contract.Block{}, err
	}
	return r.Block, nil
}

// DeleteBlock lifts the block of key and returns it; a *contract.Error with
// CodeNotFound when the key is not blocked. It gives capacity back, so it
// is acknowledged only once the deny leases that could contradict it have
// ended.
func (n *Node) DeleteBlock(ctx context.Context, key string) (contract.Block, error) {
	if err := contract.ValidateKey(key); err != nil {
		return contract.Block{}, err
	}
	r, err := commandOnLeader[fsm.BlockResult](ctx, n, fsm.CommandDeleteBlock, &fsm.BlockCommand{Key: key})
	if err != nil {
		return contract.Block{}, err
	}
	return r.Block, nil
}

// BlockSummary returns the block list at a glance, with up to latest of the
// blocks that began last, as this node has applied it, without asking the
// leader: for the status page and /v1/stats.
func (n *Node) BlockSummary(latest int) contract.BlockSummary {
	return n.fsm.BlockSummary(latest, n.clock.estimate())
}

// Blocks returns up to limit blocked keys that sort after after, with their
// blocks, and the key to continue after ("" at the end), as this node has
// applied them after catching up with the leader (as Policies does), at its
// reading of cluster time now, which it returns too.
func (n *Node) Blocks(ctx context.Context, after string, limit int) (nowNanos int64, page []contract.Block, next string, err error) {
	if err := n.catchUp(ctx); err != nil {
		return 0, nil, "", err
	}
	now := max(n.clock.estimate(), n.fsm.Now())
	page, next = n.fsm.Blocks(after, limit, now)
	return now, page, next, nil
}
