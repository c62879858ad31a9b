package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// AcquireLease takes one of req.Max concurrent slots of req.Key for at most
// req.TTL. When all are held it returns a contract.Lease with Granted false
// (not an error) at once, or, with req.MaxWait, after waiting in the group's
// queue: until a slot is granted to it, its wait runs out, or ctx ends
// (the request then leaves the queue, and gives back a slot granted
// meanwhile). The lease's ID is made here, so a call retried after an
// unknown outcome cannot take two slots or two places. The lease is held
// for the caller ctx carries (contract.WithCaller), who alone (or an admin)
// may renew or give it back; a caller holding MaxLeasesPerCaller leases and
// waiting requests is refused with CodeResourceExhausted.
func (n *Node) AcquireLease(ctx context.Context, req contract.LeaseRequest) (contract.Lease, error) {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails
	return n.acquireLease(ctx, hex.EncodeToString(raw[:]), req)
}

// acquireLease is AcquireLease with the lease's ID.
func (n *Node) acquireLease(ctx context.Context, id string, req contract.LeaseRequest) (contract.Lease, error) {
	if err := req.Validate(); err != nil {
		return contract.Lease{}, err
	}
	caller, _ := contract.CallerOf(ctx)
	cmd := fsm.LeaseCommand{ID: id, Key: req.Key, Max: req.Max, TTLNanos: int64(req.TTL),
		MaxWaitNanos: int64(req.MaxWait), MaxQueue: req.MaxQueue, Owner: caller.Name, MaxOwnerLeases: max(n.cfg.MaxLeasesPerCaller, 0)}
	var verdict <-chan fsm.LeaseResult
	var restored <-chan struct{}
	if req.MaxWait > 0 {
		verdict, restored = n.waiters.add(cmd.ID)
		defer n.waiters.remove(cmd.ID)
	}
	r, err := n.leaseOnLeader(ctx, fsm.CommandAcquireLease, cmd)
	if err != nil {
		var refused *contract.Error
		if req.MaxWait > 0 && !errors.As(err, &refused) {
			// An attempt whose outcome is unknown may have queued it.
			n.withdrawOrWarn(ctx, cmd.ID, "its acquire failed")
		}
		return contract.Lease{}, err
	}
	if r.Queued {
		if r, err = n.awaitLease(ctx, cmd.ID, r, verdict, restored); err != nil {
			return contract.Lease{}, err
		}
	}
	if r.Granted && r.GrantedAtNanos != 0 {
		// The decision is the grant: a retried acquire, or a waiter that
		// looked at the state, answers with the time it was granted at.
		r.AtNanos = r.GrantedAtNanos
	}
	// A grant from the queue lasts its claim window until claimed: after
	// a wait, or when a retried acquire finds its ID granted meanwhile.
	if r.Granted && req.MaxWait > 0 && r.ExpiresAtNanos-r.AtNanos < int64(req.TTL) {
		if r, err = n.claimLease(ctx, cmd.ID, req.TTL, r); err != nil {
			return contract.Lease{}, err
		}
	}
	return contract.Lease{ID: cmd.ID, Key: req.Key, Max: req.Max, Granted: r.Granted, Active: r.Active,
		ExpiresAtNanos: r.ExpiresAtNanos, RetryAfter: time.Duration(r.RetryAfterNanos), AtNanos: r.AtNanos,
		Waiting: r.Waiting, Waited: time.Duration(r.WaitedNanos)}, nil
}

// ReleaseLease gives a lease back, or takes a request with that ID out of
// its queue, and returns the cluster time it did so at. It returns a
// *contract.Error with CodeNotFound for a lease that is neither held nor
// waiting (given back already, or expired), and with CodePermissionDenied
// for one held for another caller than ctx's, unless that is an admin.
func (n *Node) ReleaseLease(ctx context.Context, id string) (atNanos int64, err error) {
	if err := contract.ValidateLeaseID(id); err != nil {
		return 0, err
	}
	r, err := n.leaseOnLeader(ctx, fsm.CommandReleaseLease, asCaller(ctx, fsm.LeaseCommand{ID: id}))
	if err != nil {
		return 0, err
	}
	return r.AtNanos, nil
}

// RenewLease moves a held lease's expiry to ttl from now, so that work
// that runs longer than planned keeps its slot. It returns a
// *contract.Error with CodeNotFound for a lease that is not held, and with
// CodePermissionDenied for one held for another caller, as ReleaseLease.
func (n *Node) RenewLease(ctx context.Context, id string, ttl time.Duration) (contract.Lease, error) {
	if err := contract.ValidateLeaseID(id); err != nil {
		return contract.Lease{}, err
	}
	if err := contract.ValidateLeaseTTL(ttl); err != nil {
		return contract.Lease{}, err
	}
	r, err := n.leaseOnLeader(ctx, fsm.CommandRenewLease, asCaller(ctx, fsm.LeaseCommand{ID: id, TTLNanos: int64(ttl)}))
	if err != nil {
		return contract.Lease{}, err
	}
	return contract.Lease{ID: id, Key: r.Key, Max: r.Max, Granted: true, Active: r.Active, Waiting: r.Waiting,
		ExpiresAtNanos: r.ExpiresAtNanos, AtNanos: r.AtNanos}, nil
}

// asCaller names in a renewal or a release the caller ctx carries; a call
// without one (an embedding program's, or the API's without tokens) may act
// on any lease.
func asCaller(ctx context.Context, cmd fsm.LeaseCommand) fsm.LeaseCommand {
	caller, ok := contract.CallerOf(ctx)
	cmd.Owner, cmd.AnyOwner = caller.Name, !ok || caller.Admin
	return cmd
}

// leaseOnLeader runs a lease command (fsm.CommandAcquireLease,
// CommandRenewLease or CommandReleaseLease) on the leader, here or by
// forwarding. Each is idempotent: an acquire carries its ID, a renewal sets
// the same expiry from a later time, and a release of a lease already
// released finds nothing.
func (n *Node) leaseOnLeader(ctx context.Context, t fsm.CommandType, cmd fsm.LeaseCommand) (*fsm.LeaseResult, error) {
	return commandOnLeader[fsm.LeaseResult](ctx, n, t, &cmd)
}

// Leases returns the leases held on key and the requests waiting for one, as
// this node has applied them (a follower may trail the leader by a few
// entries), seen at this node's reading of cluster time now (the latest
// stamp it applied plus the real time since), which it returns too: on an
// idle cluster the last entry may be long past.
func (n *Node) Leases(key string) (nowNanos int64, leases []contract.HeldLease, queued []contract.QueuedLease) {
	return n.fsm.Leases(key, n.clock.estimate())
}
