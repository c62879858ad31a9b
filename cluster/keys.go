package cluster

import (
	"context"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// ResetKey deletes the key's state under every limit and policy through the
// log, so that every node resets it at one index, and returns how many
// limits it held state under; a *contract.Error with CodeNotFound when it
// held none. It gives capacity back, as a policy change does.
func (n *Node) ResetKey(ctx context.Context, key string) (int, error) {
	if err := contract.ValidateKey(key); err != nil {
		return 0, err
	}
	r, err := commandOnLeader[fsm.ResetResult](ctx, n, fsm.CommandResetKey, &fsm.NamedDeleteCommand{Name: key})
	if err != nil {
		return 0, err
	}
	return r.Buckets, nil
}

// Key returns the key's state under each limit, as this node has applied it
// after catching up with the leader (as Policies does), at its reading of
// cluster time now; false when it holds none.
func (n *Node) Key(ctx context.Context, key string) (contract.KeyState, bool, error) {
	if err := n.catchUp(ctx); err != nil {
		return contract.KeyState{}, false, err
	}
	ks, ok := n.fsm.KeyState(key, n.clock.estimate())
	return ks, ok, nil
}

// Keys returns up to limit live keys that start with prefix and sort after
// after, each with its state, and the key to continue after ("" at the
// end), read as Key reads.
func (n *Node) Keys(ctx context.Context, prefix, after string, limit int) (page []contract.KeyState, next string, err error) {
	if err := n.catchUp(ctx); err != nil {
		return nil, "", err
	}
	page, next = n.fsm.KeysPage(prefix, after, limit, n.clock.estimate())
	return page, next, nil
}
