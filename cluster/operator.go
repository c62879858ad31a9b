package cluster

import (
	"context"
	"slices"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// The operator's Go API: policies, blocks, keys and the audit trail. Each
// change is a command through the log (commandOnLeader), validated as the
// HTTP API validates it; each read answers from this node's state once it
// holds every write acknowledged before the call (catchUp, the read index),
// or an error when no leader can say what that is.

// PutPolicy creates or replaces a policy (its overrides may come in any
// order). Keys limited by an earlier version keep their usage, converted to
// the new limit (see algorithms.Convert).
func (n *Node) PutPolicy(ctx context.Context, p contract.Policy) error {
	p.Overrides = slices.Clone(p.Overrides)
	p.Normalize()
	if err := p.Validate(); err != nil {
		return err
	}
	_, err := commandOnLeader[struct{}](ctx, n.route, fsm.CommandPutPolicy, &p)
	return err
}

// DeletePolicy deletes a policy; a *contract.Error with CodeNotFound if
// there is none by that name. State of keys it limited expires as usual.
func (n *Node) DeletePolicy(ctx context.Context, name string) error {
	if err := contract.ValidatePolicyName(name); err != nil {
		return err
	}
	_, err := commandOnLeader[struct{}](ctx, n.route, fsm.CommandDeletePolicy, &fsm.NamedDeleteCommand{Name: name})
	return err
}

// Policies returns up to limit policies named after after, sorted by name
// and holding at most maxOverrides overrides (at least one policy); next is
// the name to continue after, or "" at the end. The node first catches up
// with every write acknowledged before the call, by the leader's read index
// (readindex.go), so a read after a write sees it on any node; when no
// leader can give one, the error wraps contract.ErrNoLeader.
func (n *Node) Policies(ctx context.Context, after string, limit, maxOverrides int) (page []contract.PolicyStatus, next string, err error) {
	if err := n.route.catchUp(ctx); err != nil {
		return nil, "", err
	}
	page, next = n.fsm.PoliciesPage(after, limit, maxOverrides)
	return page, next, nil
}

// Policy returns the named policy, after catching up as Policies does.
func (n *Node) Policy(ctx context.Context, name string) (contract.PolicyStatus, bool, error) {
	if err := n.route.catchUp(ctx); err != nil {
		return contract.PolicyStatus{}, false, err
	}
	p, ok := n.fsm.Policy(name)
	return p, ok, nil
}

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
	r, err := commandOnLeader[fsm.BlockResult](ctx, n.route, fsm.CommandPutBlock, &fsm.BlockCommand{Key: req.Key, Reason: req.Reason, TTLNanos: int64(req.TTL)})
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
	r, err := commandOnLeader[fsm.BlockResult](ctx, n.route, fsm.CommandDeleteBlock, &fsm.BlockCommand{Key: key})
	if err != nil {
		return contract.Block{}, err
	}
	return r.Block, nil
}

// BlockSummary returns the block list at a glance, with up to latest of the
// blocks that began last, as this node has applied it, without asking the
// leader: for the status page and /v1/stats.
func (n *Node) BlockSummary(latest int) contract.BlockSummary {
	return n.fsm.BlockSummary(latest, n.clock.Estimate())
}

// Blocks returns up to limit blocked keys that sort after after, with their
// blocks, and the key to continue after ("" at the end), as this node has
// applied them after catching up with the leader (as Policies does), at its
// reading of cluster time now, which it returns too.
func (n *Node) Blocks(ctx context.Context, after string, limit int) (nowNanos int64, page []contract.Block, next string, err error) {
	if err := n.route.catchUp(ctx); err != nil {
		return 0, nil, "", err
	}
	now := max(n.clock.Estimate(), n.fsm.Now())
	page, next = n.fsm.Blocks(after, limit, now)
	return now, page, next, nil
}

// ResetKey deletes the key's state under every limit and policy through the
// log, so that every node resets it at one index, and returns how many
// limits it held state under; a *contract.Error with CodeNotFound when it
// held none. It gives capacity back, as a policy change does.
func (n *Node) ResetKey(ctx context.Context, key string) (int, error) {
	if err := contract.ValidateKey(key); err != nil {
		return 0, err
	}
	r, err := commandOnLeader[fsm.ResetResult](ctx, n.route, fsm.CommandResetKey, &fsm.NamedDeleteCommand{Name: key})
	if err != nil {
		return 0, err
	}
	return r.Buckets, nil
}

// Key returns the key's state under each limit, as this node has applied it
// after catching up with the leader (as Policies does), at its reading of
// cluster time now; false when it holds none.
func (n *Node) Key(ctx context.Context, key string) (contract.KeyState, bool, error) {
	if err := n.route.catchUp(ctx); err != nil {
		return contract.KeyState{}, false, err
	}
	ks, ok := n.fsm.KeyState(key, n.clock.Estimate())
	return ks, ok, nil
}

// Keys returns up to limit live keys that start with prefix and sort after
// after, each with its state, and the key to continue after ("" at the
// end), read as Key reads.
func (n *Node) Keys(ctx context.Context, prefix, after string, limit int) (page []contract.KeyState, next string, err error) {
	if err := n.route.catchUp(ctx); err != nil {
		return nil, "", err
	}
	page, next = n.fsm.KeysPage(prefix, after, limit, n.clock.Estimate())
	return page, next, nil
}

// The audit trail, as a node reads and writes it. An operator's command
// carries who asked (contract.ActorOf its context) into the log inside
// fsm.CommandAudited (commandOnLeader), so the change and its record are
// one entry. A change made outside the FSM is recorded by the leader once
// it is done (recordAudit).

// recordAudit appends, on the leader, the record of a change made outside
// the FSM. The change is made already: a record that cannot be appended
// is logged, not returned.
func (rt *leaderRoute) recordAudit(ctx context.Context, action, subject, detail string) {
	cmd := &fsm.AuditCommand{Actor: contract.ActorOf(ctx), Action: action, Subject: subject, Detail: detail}
	err := func() error {
		stamp, err := rt.replica.leaderStamp()
		if err != nil {
			return err
		}
		cmd.NowNanos = stamp
		return rt.replica.applyCommand(fsm.CommandAudit, cmd)
	}()
	if err != nil {
		rt.logger.Warn("the audit trail could not record a change", "action", action, "subject", subject, "actor", cmd.Actor, "err", err)
	}
}

// Audit returns up to limit entries of the audit trail recorded after log
// index since, oldest first, as this node has applied them after catching
// up with the leader (as Policies does).
func (n *Node) Audit(ctx context.Context, since uint64, limit int) (contract.AuditPage, error) {
	if err := n.route.catchUp(ctx); err != nil {
		return contract.AuditPage{}, err
	}
	return n.fsm.AuditPage(since, limit), nil
}

// RecentAudit returns the last n entries of the audit trail this node has
// applied, newest first, without asking the leader: for the status page.
func (n *Node) RecentAudit(count int) []contract.AuditEntry { return n.fsm.RecentAudit(count) }
