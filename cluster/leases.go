package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/limitnode/limitnode/cluster/internal/leasewait"
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
	return n.leases.acquire(ctx, hex.EncodeToString(raw[:]), req)
}

// acquireLease is AcquireLease with the lease's ID.
func (q *leaseQueues) acquire(ctx context.Context, id string, req contract.LeaseRequest) (contract.Lease, error) {
	if err := req.Validate(); err != nil {
		return contract.Lease{}, err
	}
	caller, _ := contract.CallerOf(ctx)
	cmd := fsm.LeaseCommand{ID: id, Key: req.Key, Max: req.Max, TTLNanos: int64(req.TTL),
		MaxWaitNanos: int64(req.MaxWait), MaxQueue: req.MaxQueue, Owner: caller.Name, MaxOwnerLeases: max(q.maxPerCaller, 0)}
	var verdict <-chan fsm.LeaseResult
	var restored <-chan struct{}
	if req.MaxWait > 0 {
		verdict, restored = q.waiters.Add(cmd.ID)
		defer q.waiters.Remove(cmd.ID)
	}
	r, err := q.command(ctx, fsm.CommandAcquireLease, cmd)
	if err != nil {
		var refused *contract.Error
		if req.MaxWait > 0 && !errors.As(err, &refused) {
			// An attempt whose outcome is unknown may have queued it.
			q.withdrawOrWarn(ctx, cmd.ID, "its acquire failed")
		}
		return contract.Lease{}, err
	}
	if r.Queued {
		if r, err = q.await(ctx, cmd.ID, r, verdict, restored); err != nil {
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
		if r, err = q.claim(ctx, cmd.ID, req.TTL, r); err != nil {
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
	r, err := n.leases.command(ctx, fsm.CommandReleaseLease, asCaller(ctx, fsm.LeaseCommand{ID: id}))
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
	r, err := n.leases.command(ctx, fsm.CommandRenewLease, asCaller(ctx, fsm.LeaseCommand{ID: id, TTLNanos: int64(ttl)}))
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
func (q *leaseQueues) command(ctx context.Context, t fsm.CommandType, cmd fsm.LeaseCommand) (*fsm.LeaseResult, error) {
	return commandOnLeader[fsm.LeaseResult](ctx, q.route, t, &cmd)
}

// Leases returns the leases held on key and the requests waiting for one, as
// this node has applied them (a follower may trail the leader by a few
// entries), seen at this node's reading of cluster time now (the latest
// stamp it applied plus the real time since), which it returns too: on an
// idle cluster the last entry may be long past.
func (n *Node) Leases(key string) (nowNanos int64, leases []contract.HeldLease, queued []contract.QueuedLease) {
	return n.fsm.Leases(key, n.clock.Estimate())
}

// How a node serves the lease queues (fsm/leasequeue.go): the requests
// waiting on this node hear their verdict when this node applies the entry
// that decides it, whichever node's caller caused it; and the leader appends
// a tick when a queue is due to change by time alone.
const (
	// leaseVerdictGrace is how long past its deadline a waiter waits for
	// the entry that times it out before it asks the leader to take it
	// out: a lagging replica, or a snapshot that skipped the events.
	leaseVerdictGrace = time.Second
	// leaseQueueIdleCheck bounds how long the tick loop sleeps with nobody
	// waiting, or before looking again after leadership changes.
	leaseQueueIdleCheck = 250 * time.Millisecond
)

// leaseQueues is this node's side of the lease queues: the requests
// waiting on it for their verdict, and, while it leads, the tick that
// applies a queue's change by time alone.
type leaseQueues struct {
	route        *leaderRoute
	waiters      *leasewait.Waiters
	kicks        chan struct{} // wakes the tick loop (kick)
	logger       *slog.Logger
	maxPerCaller int64 // Config.MaxLeasesPerCaller
}

func newLeaseQueues(route *leaderRoute, waiters *leasewait.Waiters, logger *slog.Logger, maxPerCaller int64) *leaseQueues {
	return &leaseQueues{route: route, waiters: waiters, kicks: make(chan struct{}, 1), logger: logger, maxPerCaller: maxPerCaller}
}

// await waits for the verdict on a request the leader queued: granted,
// or out of the queue without a slot. restored is the restore signal of
// the moment the request was registered. A caller that goes away (ctx
// ends), or a node that shuts down, takes the request out of the queue and
// gives back a slot granted meanwhile. A verdict that has not come a
// leaseVerdictGrace past the deadline is asked of the leader: a slot
// granted meanwhile is the answer, else the request is taken out.
func (q *leaseQueues) await(ctx context.Context, id string, queued *fsm.LeaseResult, verdict <-chan fsm.LeaseResult, restored <-chan struct{}) (*fsm.LeaseResult, error) {
	late := time.NewTimer(time.Duration(queued.DeadlineNanos-queued.AtNanos) + leaseVerdictGrace)
	defer late.Stop()
	joined := queued.AtNanos - queued.WaitedNanos
	for {
		select {
		case r := <-verdict:
			if r.AtNanos-r.WaitedNanos != joined {
				// The verdict on an earlier place of this ID: an attempt
				// whose outcome was unknown queued it, it left, and the
				// retry queued it again.
				continue
			}
			return &r, nil
		case <-restored:
			restored = q.waiters.RestoredSignal()
			if r := q.route.replica.fsm.LeaseOf(id); r.Granted {
				return &r, nil
			}
		case <-late.C:
			if r := q.route.replica.fsm.LeaseOf(id); r.Granted {
				return &r, nil
			}
			// The caller still waits: a slot granted to it meanwhile (an
			// event this node has not applied yet) is its answer.
			r, err := q.withdraw(ctx, id, true)
			if err != nil || r.Granted {
				return r, err
			}
			// However it left (its deadline's entry not applied here yet,
			// or withdrawn now), it waited its whole max_wait: from the
			// time it joined to this answer's, as every answer counts it.
			r.AtNanos = max(r.AtNanos, queued.DeadlineNanos)
			r.WaitedNanos = r.AtNanos - joined
			return r, nil
		case <-ctx.Done():
			q.withdrawOrWarn(ctx, id, "its caller went away")
			return nil, ctx.Err()
		case <-q.route.replica.stop:
			q.withdrawOrWarn(ctx, id, "its node is shutting down")
			return nil, contract.ErrShutdown
		}
	}
}

// claim claims a lease granted to a waiter, which lasts only
// fsm.LeaseClaimWindow until then: the claim extends it to the request's
// TTL from its grant. A lease the window ran out on (this node heard of
// the grant too late) is answered as no slot; one this node cannot claim
// for now keeps its short expiry, and the caller learns it from the answer
// (its holder renews it, as WithLease does).
func (q *leaseQueues) claim(ctx context.Context, id string, ttl time.Duration, granted *fsm.LeaseResult) (*fsm.LeaseResult, error) {
	claimed, err := q.command(ctx, fsm.CommandRenewLease, fsm.LeaseCommand{ID: id, TTLNanos: int64(ttl), AnyOwner: true, Claim: true})
	var gone *contract.Error
	switch {
	case errors.As(err, &gone) && gone.Code == contract.CodeNotFound:
		return &fsm.LeaseResult{Active: granted.Active, Waiting: granted.Waiting, WaitedNanos: granted.WaitedNanos, AtNanos: granted.AtNanos,
			RetryAfterNanos: 1}, nil
	case err != nil:
		q.logger.Warn("a lease granted to a waiter could not be claimed; it lasts its claim window unless renewed", "err", err)
		return granted, nil
	}
	// The grant's time stays the decision's: the slot was held from then.
	out := *granted
	out.ExpiresAtNanos = claimed.ExpiresAtNanos
	return &out, nil
}

// withdrawOrWarn withdraws a request nobody will wait for any more, and
// logs when it cannot: the request then stays queued until its deadline,
// and a slot granted to it idles until its TTL.
func (q *leaseQueues) withdrawOrWarn(ctx context.Context, id, why string) {
	if _, err := q.withdraw(ctx, id, false); err != nil {
		q.logger.Warn("a lease request stays queued until its deadline: "+why+", and withdrawing it failed", "err", err)
	}
}

// withdraw takes id out of its queue, even when ctx has ended (its
// caller went away), and answers as a request that got no slot. A lease
// granted to id meanwhile is given back, or, with waiterOnly (for a caller
// that still waits), kept and answered as held.
func (q *leaseQueues) withdraw(ctx context.Context, id string, waiterOnly bool) (*fsm.LeaseResult, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.route.replica.timeout)
	defer cancel()
	r, err := q.command(ctx, fsm.CommandReleaseLease, fsm.LeaseCommand{ID: id, AnyOwner: true, WaiterOnly: waiterOnly})
	var notHeld *contract.Error
	switch {
	case errors.As(err, &notHeld) && notHeld.Code == contract.CodeNotFound:
		// It left by itself (its deadline passed) before the withdrawal.
		r = &fsm.LeaseResult{AtNanos: q.route.replica.fsm.Now()}
	case err != nil:
		return nil, err
	case r.Granted:
		return r, nil
	}
	return &fsm.LeaseResult{Active: r.Active, Waiting: r.Waiting, RetryAfterNanos: r.RetryAfterNanos, WaitedNanos: r.WaitedNanos, AtNanos: r.AtNanos}, nil
}

// kick tells the tick loop that a queue may have become due
// sooner.
func (q *leaseQueues) kick() {
	select {
	case q.kicks <- struct{}{}:
	default:
	}
}

// watch runs while the node does: on the leader, it appends a
// CommandLeaseTick when a queue is due to change by time alone (a waiter's
// deadline, or a lease expiry that frees a slot for a waiter), so that the
// change is applied then although nothing else is appended.
func (q *leaseQueues) watch() {
	timer := time.NewTimer(leaseQueueIdleCheck)
	defer timer.Stop()
	for {
		wait := leaseQueueIdleCheck
		if !q.route.replica.isLeader() {
			// Followers never tick; the lease table is not looked at.
		} else if due, ok := q.route.replica.fsm.NextLeaseDue(); ok {
			if stamp, err := q.route.replica.leaderStamp(); err == nil {
				if stamp >= due {
					err := q.route.replica.applyCommand(fsm.CommandLeaseTick, &fsm.LeaseTickCommand{NowNanos: stamp})
					if err == nil {
						continue
					}
					q.logger.Debug("lease queue tick not applied", "err", err)
				} else {
					wait = min(wait, time.Duration(due-stamp))
				}
			}
		}
		timer.Reset(wait)
		select {
		case <-q.route.replica.stop:
			return
		case <-q.kicks:
		case <-timer.C:
		}
	}
}
