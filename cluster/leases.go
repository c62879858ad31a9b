package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// AcquireLease takes one of req.Max concurrent slots of req.Key for at most
// req.TTL. When all are held it returns a contract.Lease with Granted false (not an
// error). The lease's ID is made here, so a call retried after an unknown
// outcome cannot take two slots.
func (n *Node) AcquireLease(ctx context.Context, req contract.LeaseRequest) (contract.Lease, error) {
	if err := req.Validate(); err != nil {
		return contract.Lease{}, err
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails
	cmd := fsm.LeaseCommand{ID: hex.EncodeToString(raw[:]), Key: req.Key, Max: req.Max, TTLNanos: int64(req.TTL)}
	r, err := n.leaseOnLeader(ctx, opAcquireLease, cmd)
	if err != nil {
		return contract.Lease{}, err
	}
	return contract.Lease{ID: cmd.ID, Key: req.Key, Max: req.Max, Granted: r.Granted, Active: r.Active,
		ExpiresAtNanos: r.ExpiresAtNanos, RetryAfterNanos: r.RetryAfterNanos, AtNanos: r.AtNanos}, nil
}

// ReleaseLease gives a lease back. It returns a *contract.Error with
// CodeNotFound for a lease that is not held: given back already, or expired.
func (n *Node) ReleaseLease(ctx context.Context, id string) error {
	if err := contract.ValidateLeaseID(id); err != nil {
		return err
	}
	_, err := n.leaseOnLeader(ctx, opReleaseLease, fsm.LeaseCommand{ID: id})
	return err
}

// leaseOnLeader runs a lease command on the leader, here or by forwarding.
// Both are idempotent: an acquire carries its ID, and a release of a lease
// already released finds nothing.
func (n *Node) leaseOnLeader(ctx context.Context, op forwardOp, cmd fsm.LeaseCommand) (*fsm.LeaseResult, error) {
	return onLeader(ctx, n, true, func(ctx context.Context) (*fsm.LeaseResult, error) {
		if n.isLeader() {
			return n.leaseAsLeader(op == opAcquireLease, cmd)
		}
		resp, err := n.forwardToLeader(ctx, &forwardRequest{Op: op, Lease: cmd})
		if err != nil {
			return nil, err
		}
		if resp.Lease == nil {
			return nil, errMissingLeaseResult
		}
		return resp.Lease, nil
	})
}

// leaseAsLeader stamps a lease command with the leader's time and applies it.
func (n *Node) leaseAsLeader(acquire bool, cmd fsm.LeaseCommand) (*fsm.LeaseResult, error) {
	stamp, err := n.leaderStamp()
	if err != nil {
		return nil, err
	}
	cmd.NowNanos = stamp
	ct := fsm.CommandReleaseLease
	if acquire {
		ct = fsm.CommandAcquireLease
	}
	resp, err := n.applyCommandResult(ct, &cmd)
	if err != nil {
		return nil, err
	}
	result, ok := resp.(*fsm.LeaseResult)
	if !ok {
		return nil, errMissingLeaseResult
	}
	return result, nil
}

// Leases returns the leases held on key as this node has applied them (a
// follower may trail the leader by a few entries), with the cluster time of
// that state.
func (n *Node) Leases(key string) (nowNanos int64, leases []contract.HeldLease) {
	return n.fsm.Leases(key)
}
