package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/limitnode/limitnode/fsm"
)

// Lease is a held concurrency lease: one of Max slots of Key, until it is
// given back or ExpiresAtNanos passes.
type Lease struct {
	ID  string
	Key string
	Max int64
	// Granted is false when all slots were taken; RetryAfterNanos then
	// says when the earliest holder's lease expires.
	Granted bool
	// Active is how many slots are held after this request.
	Active          int64
	ExpiresAtNanos  int64
	RetryAfterNanos int64
	// AtNanos is the cluster time of the decision.
	AtNanos int64
}

// AcquireLease takes one of max concurrent slots of key for at most ttl.
// When all are held it returns a Lease with Granted false (not an error).
// The lease's ID is made here, so a call retried after an unknown outcome
// cannot take two slots.
func (n *Node) AcquireLease(ctx context.Context, key string, maxHolders int64, ttl time.Duration) (Lease, error) {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails
	cmd := fsm.LeaseCommand{ID: hex.EncodeToString(raw[:]), Key: key, Max: maxHolders, TTLNanos: int64(ttl)}
	if err := fsm.ValidateLease(cmd.ID, key, maxHolders, cmd.TTLNanos); err != nil {
		return Lease{}, rejected(err)
	}
	r, err := n.leaderCall(ctx, &forwardRequest{Op: opAcquireLease, Lease: cmd}, func() (*fsm.LeaseResult, error) {
		return n.leaseAsLeader(true, cmd)
	})
	if err != nil {
		return Lease{}, err
	}
	return Lease{ID: cmd.ID, Key: key, Max: maxHolders, Granted: r.Granted, Active: r.Active,
		ExpiresAtNanos: r.ExpiresAtNanos, RetryAfterNanos: r.RetryAfterNanos, AtNanos: r.AtNanos}, nil
}

// ReleaseLease gives a lease back. It returns ErrNotFound (a
// *RejectedError) for a lease that is not held: given back already, or
// expired.
func (n *Node) ReleaseLease(ctx context.Context, id string) error {
	cmd := fsm.LeaseCommand{ID: id}
	_, err := n.leaderCall(ctx, &forwardRequest{Op: opReleaseLease, Lease: cmd}, func() (*fsm.LeaseResult, error) {
		return n.leaseAsLeader(false, cmd)
	})
	return err
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
	return resp.(*fsm.LeaseResult), nil
}
