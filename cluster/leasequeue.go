package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

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

// leaseWaiters are the lease requests waiting on this node for their
// queue's verdict, by ID.
type leaseWaiters struct {
	mu       sync.Mutex
	verdicts map[string]chan fsm.LeaseResult
	// restored is closed, and replaced, when a snapshot replaces the
	// state: its entries' events were never applied here.
	restored chan struct{}
}

func newLeaseWaiters() *leaseWaiters {
	return &leaseWaiters{verdicts: map[string]chan fsm.LeaseResult{}, restored: make(chan struct{})}
}

// add registers id, before its acquire is sent, so that no verdict can be
// applied before there is somewhere to put it. It returns the channel of
// verdicts and the restore signal of that moment.
func (w *leaseWaiters) add(id string) (verdicts <-chan fsm.LeaseResult, restored <-chan struct{}) {
	ch := make(chan fsm.LeaseResult, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.verdicts[id] = ch
	return ch, w.restored
}

func (w *leaseWaiters) remove(id string) {
	w.mu.Lock()
	delete(w.verdicts, id)
	w.mu.Unlock()
}

// deliver hands an applied event to its waiter, if it waits here. It runs
// on the applying goroutine (the only sender) and never blocks: the channel
// holds the latest verdict, which replaces one not yet read (the verdict on
// an earlier place of the same ID, see awaitLease).
func (w *leaseWaiters) deliver(ev fsm.LeaseEvent) {
	w.mu.Lock()
	ch := w.verdicts[ev.ID]
	w.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- ev.Result:
	default:
		select {
		case <-ch:
		default:
		}
		ch <- ev.Result
	}
}

// signalRestored wakes every waiter to look at the restored state.
func (w *leaseWaiters) signalRestored() {
	w.mu.Lock()
	close(w.restored)
	w.restored = make(chan struct{})
	w.mu.Unlock()
}

func (w *leaseWaiters) restoredSignal() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.restored
}

// awaitLease waits for the verdict on a request the leader queued: granted,
// or out of the queue without a slot. restored is the restore signal of
// the moment the request was registered. A caller that goes away (ctx
// ends), or a node that shuts down, takes the request out of the queue and
// gives back a slot granted meanwhile. A verdict that has not come a
// leaseVerdictGrace past the deadline is asked of the leader: a slot
// granted meanwhile is the answer, else the request is taken out.
func (n *Node) awaitLease(ctx context.Context, id string, queued *fsm.LeaseResult, verdict <-chan fsm.LeaseResult, restored <-chan struct{}) (*fsm.LeaseResult, error) {
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
			restored = n.waiters.restoredSignal()
			if r := n.fsm.LeaseOf(id); r.Granted {
				return &r, nil
			}
		case <-late.C:
			if r := n.fsm.LeaseOf(id); r.Granted {
				return &r, nil
			}
			// The caller still waits: a slot granted to it meanwhile (an
			// event this node has not applied yet) is its answer.
			r, err := n.withdrawLease(ctx, id, true)
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
			n.withdrawOrWarn(ctx, id, "its caller went away")
			return nil, ctx.Err()
		case <-n.stopCh:
			n.withdrawOrWarn(ctx, id, "its node is shutting down")
			return nil, contract.ErrShutdown
		}
	}
}

// claimLease claims a lease granted to a waiter, which lasts only
// fsm.LeaseClaimWindow until then: the claim extends it to the request's
// TTL from its grant. A lease the window ran out on (this node heard of
// the grant too late) is answered as no slot; one this node cannot claim
// for now keeps its short expiry, and the caller learns it from the answer
// (its holder renews it, as WithLease does).
func (n *Node) claimLease(ctx context.Context, id string, ttl time.Duration, granted *fsm.LeaseResult) (*fsm.LeaseResult, error) {
	claimed, err := n.leaseOnLeader(ctx, fsm.CommandRenewLease, fsm.LeaseCommand{ID: id, TTLNanos: int64(ttl), AnyOwner: true, Claim: true})
	var gone *contract.Error
	switch {
	case errors.As(err, &gone) && gone.Code == contract.CodeNotFound:
		return &fsm.LeaseResult{Active: granted.Active, Waiting: granted.Waiting, WaitedNanos: granted.WaitedNanos, AtNanos: granted.AtNanos,
			RetryAfterNanos: 1}, nil
	case err != nil:
		n.logger.Warn("a lease granted to a waiter could not be claimed; it lasts its claim window unless renewed", "err", err)
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
func (n *Node) withdrawOrWarn(ctx context.Context, id, why string) {
	if _, err := n.withdrawLease(ctx, id, false); err != nil {
		n.logger.Warn("a lease request stays queued until its deadline: "+why+", and withdrawing it failed", "err", err)
	}
}

// withdrawLease takes id out of its queue, even when ctx has ended (its
// caller went away), and answers as a request that got no slot. A lease
// granted to id meanwhile is given back, or, with waiterOnly (for a caller
// that still waits), kept and answered as held.
func (n *Node) withdrawLease(ctx context.Context, id string, waiterOnly bool) (*fsm.LeaseResult, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.requestTimeout)
	defer cancel()
	r, err := n.leaseOnLeader(ctx, fsm.CommandReleaseLease, fsm.LeaseCommand{ID: id, AnyOwner: true, WaiterOnly: waiterOnly})
	var notHeld *contract.Error
	switch {
	case errors.As(err, &notHeld) && notHeld.Code == contract.CodeNotFound:
		// It left by itself (its deadline passed) before the withdrawal.
		r = &fsm.LeaseResult{AtNanos: n.fsm.Now()}
	case err != nil:
		return nil, err
	case r.Granted:
		return r, nil
	}
	return &fsm.LeaseResult{Active: r.Active, Waiting: r.Waiting, RetryAfterNanos: r.RetryAfterNanos, WaitedNanos: r.WaitedNanos, AtNanos: r.AtNanos}, nil
}

// kickLeaseQueues tells the tick loop that a queue may have become due
// sooner.
func (n *Node) kickLeaseQueues() {
	select {
	case n.leaseQueueKick <- struct{}{}:
	default:
	}
}

// watchLeaseQueues runs while the node does: on the leader, it appends a
// CommandLeaseTick when a queue is due to change by time alone (a waiter's
// deadline, or a lease expiry that frees a slot for a waiter), so that the
// change is applied then although nothing else is appended.
func (n *Node) watchLeaseQueues() {
	timer := time.NewTimer(leaseQueueIdleCheck)
	defer timer.Stop()
	for {
		wait := leaseQueueIdleCheck
		if !n.IsLeader() {
			// Followers never tick; the lease table is not looked at.
		} else if due, ok := n.fsm.NextLeaseDue(); ok {
			if stamp, err := n.replica.leaderStamp(); err == nil {
				if stamp >= due {
					err := n.replica.applyCommand(fsm.CommandLeaseTick, &fsm.LeaseTickCommand{NowNanos: stamp})
					if err == nil {
						continue
					}
					n.logger.Debug("lease queue tick not applied", "err", err)
				} else {
					wait = min(wait, time.Duration(due-stamp))
				}
			}
		}
		timer.Reset(wait)
		select {
		case <-n.stopCh:
			return
		case <-n.leaseQueueKick:
		case <-timer.C:
		}
	}
}
