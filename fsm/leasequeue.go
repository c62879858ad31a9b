package fsm

import (
	"cmp"
	"container/list"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/limitnode/limitnode/contract"
)

// The lease queue: a lease request that finds its group full may wait, in
// a FIFO queue per group, for a slot. The queue is replicated state like the
// leases: a waiter joins with its acquire entry, is granted when an entry
// stamped before its deadline frees a slot (a release, or an expiry that
// any stamped entry's time brings), and leaves without a slot in the first
// entry stamped at or after its deadline, or when it is withdrawn
// (CommandReleaseLease with its ID). Every grant and departure is at the
// time of the entry that makes it, so a grant's wait is always shorter
// than the request's max_wait. Each is reported as a LeaseEvent, so that
// the node where the caller waits can answer it when it applies the entry.

// LeaseEvent reports a waiter leaving its queue: granted its lease
// (Result.Granted), or not, when its deadline passed or it was withdrawn.
type LeaseEvent struct {
	ID     string
	Result LeaseResult
}

// waiter is a lease request in its group's queue.
type waiter struct {
	id         string
	group      leaseGroup
	owner      string // whose it is (LeaseCommand.Owner)
	ttl        int64
	enqueuedAt int64
	deadline   int64
	place      *list.Element // in the group's queue
	index      int           // in the table's deadline heap
}

// waitersByDeadline is a heap of waiters by (deadline, ID).
func waitersByDeadline() *orderedHeap[waiter] {
	return newOrderedHeap(func(a, b *waiter) int {
		return cmp.Or(cmp.Compare(a.deadline, b.deadline), strings.Compare(a.id, b.id))
	}, func(w *waiter) *int { return &w.index })
}

// waiting returns how many requests wait in g's queue.
func (t *leaseTable) waiting(g leaseGroup) int64 {
	if q := t.queues[g]; q != nil {
		return int64(q.Len())
	}
	return 0
}

// enqueue puts w last in its group's queue.
func (t *leaseTable) enqueue(w *waiter) {
	q := t.queues[w.group]
	if q == nil {
		q = list.New()
		t.queues[w.group] = q
	}
	w.place = q.PushBack(w)
	t.waiters[w.id] = w
	t.own(w.owner, 1)
	t.deadlines.add(w)
}

// unqueue takes w out of every index.
func (t *leaseTable) unqueue(w *waiter) {
	q := t.queues[w.group]
	q.Remove(w.place)
	if q.Len() == 0 {
		delete(t.queues, w.group)
	}
	t.deadlines.remove(w)
	delete(t.waiters, w.id)
	t.own(w.owner, -1)
}

// position returns w's place in its queue, from 1.
func (t *leaseTable) position(w *waiter) int64 {
	n := int64(1)
	for e := t.queues[w.group].Front(); e != w.place; e = e.Next() {
		n++
	}
	return n
}

// retryAfter is the time from now until g's earliest lease expires, at
// least 1 ns, or 0 when g holds none.
func (t *leaseTable) retryAfter(g leaseGroup, now int64) int64 {
	h := t.groups[g]
	if h == nil {
		return 0
	}
	return max(h.first().expiresAt-now, 1)
}

// queued answers an acquire whose ID waits at position.
func (t *leaseTable) queued(w *waiter, position, now int64) LeaseResult {
	return LeaseResult{Queued: true, Position: position, DeadlineNanos: w.deadline,
		Active: t.active(w.group), Waiting: t.waiting(w.group), WaitedNanos: now - w.enqueuedAt}
}

// leave takes w out of its queue without a slot, reports it, and returns
// what it reported.
func (t *leaseTable) leave(w *waiter, now int64, withdrawn bool) LeaseResult {
	t.unqueue(w)
	r := LeaseResult{
		Withdrawn: withdrawn, Active: t.active(w.group), Waiting: t.waiting(w.group),
		RetryAfterNanos: t.retryAfter(w.group, now), WaitedNanos: now - w.enqueuedAt, AtNanos: now,
	}
	t.events = append(t.events, LeaseEvent{ID: w.id, Result: r})
	return r
}

// LeaseClaimWindow is how long a lease granted to a waiter lasts until the
// node where the waiter waits claims it (LeaseCommand.Claim, sent when that
// node applies the grant), if its TTL is longer: a waiter whose node
// crashed keeps the slot from others for this long, not for its whole TTL.
// A claimed lease expires its TTL after its grant, as every lease does.
const LeaseClaimWindow = 5 * time.Second

// grantWaiters gives g's free slots, at now, to its first waiters in order;
// a waiter whose deadline has come by now leaves instead, so a grant always
// comes within the waiter's max_wait. A granted lease runs from now, for its
// TTL or, until it is claimed, LeaseClaimWindow if that is shorter.
func (t *leaseTable) grantWaiters(g leaseGroup, now int64) {
	for t.waiting(g) > 0 && t.active(g) < g.max {
		w := t.queues[g].Front().Value.(*waiter)
		if w.deadline <= now {
			t.leave(w, now, false)
			continue
		}
		t.unqueue(w)
		l := &lease{id: w.id, group: g, owner: w.owner, grantedAt: now, waited: now - w.enqueuedAt,
			expiresAt: now + min(w.ttl, int64(LeaseClaimWindow))}
		if w.ttl > int64(LeaseClaimWindow) {
			l.claimTTL = w.ttl
		}
		t.add(l)
		r := t.heldResult(l)
		r.AtNanos = now
		t.events = append(t.events, LeaseEvent{ID: w.id, Result: r})
	}
}

// nextDue returns the earliest cluster time at which a queue changes by
// itself (a waiter's deadline, or the expiry of a lease of a group with
// waiters), and whether there is one: none while nobody waits. It looks at
// each group with waiters, so it is not for the apply path.
func (t *leaseTable) nextDue() (int64, bool) {
	first := t.deadlines.first()
	if first == nil {
		return 0, false
	}
	due := first.deadline
	for g := range t.queues {
		due = min(due, t.groups[g].first().expiresAt)
	}
	return due, true
}

// takeEvents returns the events of the entries applied since the last call.
func (t *leaseTable) takeEvents() []LeaseEvent {
	ev := t.events
	t.events = nil
	return ev
}

// queuedOn returns the waiters of key, in every group, ordered by maximum,
// then place in the queue.
func (t *leaseTable) queuedOn(key string) []contract.QueuedLease {
	var out []contract.QueuedLease
	for _, m := range t.maxesOf[key] {
		q := t.queues[leaseGroup{key, m}]
		if q == nil {
			continue
		}
		pos := int64(0)
		for e := q.Front(); e != nil; e = e.Next() {
			w := e.Value.(*waiter)
			pos++
			out = append(out, contract.QueuedLease{ID: w.id, Key: key, Max: m, Position: pos, DeadlineNanos: w.deadline})
		}
	}
	slices.SortStableFunc(out, func(a, b contract.QueuedLease) int { return cmp.Compare(a.Max, b.Max) })
	return out
}

// waiterRecord is a waiter in a snapshot; a group's waiters are written in
// queue order.
type waiterRecord struct {
	ID         string
	Key        string
	Max        int64
	TTL        int64
	EnqueuedAt int64
	Deadline   int64
	// Owner comes last, as leaseRecord's.
	Owner string
}

// waiterRecords returns every waiter, groups ordered by key and maximum, each
// group's in queue order.
func (t *leaseTable) waiterRecords() []waiterRecord {
	groups := make([]leaseGroup, 0, len(t.queues))
	for g := range t.queues {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b leaseGroup) int { return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.max, b.max)) })
	out := make([]waiterRecord, 0, len(t.waiters))
	for _, g := range groups {
		for e := t.queues[g].Front(); e != nil; e = e.Next() {
			w := e.Value.(*waiter)
			out = append(out, waiterRecord{ID: w.id, Key: g.key, Max: g.max, TTL: w.ttl, EnqueuedAt: w.enqueuedAt, Deadline: w.deadline, Owner: w.owner})
		}
	}
	return out
}

// restoreWaiter puts a snapshot's waiter last in its group's queue. A
// group's waiters wait only while its slots are all held.
func (t *leaseTable) restoreWaiter(rec waiterRecord) error {
	if err := validateLease(rec.ID, contract.LeaseRequest{Key: rec.Key, Max: rec.Max, TTL: time.Duration(rec.TTL)}); err != nil {
		return fmt.Errorf("waiter %q: %w", rec.ID, err)
	}
	g := leaseGroup{rec.Key, rec.Max}
	switch {
	case rec.EnqueuedAt < 0 || rec.Deadline <= rec.EnqueuedAt || rec.Deadline-rec.EnqueuedAt > int64(contract.MaxLeaseWait):
		return fmt.Errorf("waiter %q: deadline out of range", rec.ID)
	case t.byID[rec.ID] != nil || t.waiters[rec.ID] != nil || len(t.byID)+len(t.waiters) >= contract.MaxLeases:
		return fmt.Errorf("waiter %q: repeated, or too many", rec.ID)
	case t.active(g) < g.max:
		return fmt.Errorf("waiter %q: waits for a group with a free slot", rec.ID)
	case t.waiting(g) >= contract.MaxLeaseQueue:
		return fmt.Errorf("waiter %q: its group's queue is over its maximum", rec.ID)
	case len(rec.Owner) > contract.MaxScopeBytes:
		return fmt.Errorf("waiter %q: its owner's name is too long", rec.ID)
	}
	t.enqueue(&waiter{id: rec.ID, group: g, owner: rec.Owner, ttl: rec.TTL, enqueuedAt: rec.EnqueuedAt, deadline: rec.Deadline})
	return nil
}
