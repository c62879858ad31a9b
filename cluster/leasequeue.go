package cluster

import (
	"context"
	"errors"
	"log/slog"
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

// leaseQueues is this node's side of the lease queues: the requests
// waiting on it for their verdict, and, while it leads, the tick that
// applies a queue's change by time alone.
type leaseQueues struct {
	route        *leaderRoute
	waiters      *leaseWaiters
	kicks        chan struct{} // wakes the tick loop (kick)
	logger       *slog.Logger
	maxPerCaller int64 // Config.MaxLeasesPerCaller
}

func newLeaseQueues(route *leaderRoute, waiters *leaseWaiters, logger *slog.Logger, maxPerCaller int64) *leaseQueues {
	return &leaseQueues{route: route, waiters: waiters, kicks: make(chan struct{}, 1), logger: logger, maxPerCaller: maxPerCaller}
}

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
			restored = q.waiters.restoredSignal()
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
