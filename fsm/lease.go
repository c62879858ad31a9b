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

// Concurrency leases: at most Max holders of a key at once. A caller takes a
// lease before starting work and gives it back when done; a lease not given
// back expires after its TTL of cluster time, so a crashed holder cannot
// keep its slot forever.

// LeaseCommand takes (CommandAcquireLease) or gives back
// (CommandReleaseLease, only ID) a lease; giving back the ID of a waiter
// withdraws it from its queue. The ID is chosen by the node that received
// the request, so a retried acquire with the same ID is answered with the
// lease it already holds, or the place it already has in the queue.
type LeaseCommand struct {
	NowNanos int64
	ID       string
	Key      string
	Max      int64
	TTLNanos int64
	// MaxWaitNanos and MaxQueue are contract.LeaseRequest's MaxWait and
	// MaxQueue: a request that finds its group full joins the group's
	// queue if fewer than MaxQueue wait there. Last, so that entries
	// written before them decode as requests that do not wait.
	MaxWaitNanos int64
	MaxQueue     int64
	// Owner is, for an acquire, the caller the lease is held for (the API
	// token's name; "" for nobody in particular) and, for a renewal or a
	// release, the caller asking; AnyOwner lets the latter act on any
	// caller's lease (an admin, or the node itself). MaxOwnerLeases, for an
	// acquire with an Owner, bounds the leases and waiting requests the
	// owner may hold at once (0: no bound). Last, as the queue's fields.
	Owner          string
	AnyOwner       bool
	MaxOwnerLeases int64
	// Claim, on a CommandRenewLease, is the claim of a lease granted from
	// the queue, sent by the node where its request waited: the lease runs
	// the request's TTL from its grant rather than TTLNanos from now (see
	// LeaseClaimWindow). A lease with nothing to claim is left as it is, so
	// a retried claim changes nothing. Last, as the owner's fields.
	Claim bool
	// WaiterOnly, on a CommandReleaseLease, withdraws the ID only if it
	// waits: a lease granted to it is kept and answered as held (Granted),
	// so that the node whose caller still waits can hand it over.
	WaiterOnly bool
}

// LeaseResult answers a LeaseCommand.
type LeaseResult struct {
	// Granted: the lease is held (newly, or already by this ID).
	Granted bool
	// Released: CommandReleaseLease found and removed the lease.
	Released bool
	// Active is how many leases of the key are held after the command.
	Active int64
	// ExpiresAtNanos is when a granted lease expires (cluster time).
	ExpiresAtNanos int64
	// RetryAfterNanos, when not granted, is the time until the earliest
	// lease of the key expires (it may be given back sooner).
	RetryAfterNanos int64
	// AtNanos is the cluster time of the command.
	AtNanos int64
	// Rejection, when not nil, says why the command was refused as invalid.
	Rejection *contract.Error
	// The fields below are the queue's, after the ones above so that
	// results from nodes without a queue decode.
	//
	// Queued: the request waits in its group's queue, at Position (from
	// 1), until a slot is granted to it or DeadlineNanos passes.
	Queued        bool
	Position      int64
	DeadlineNanos int64
	// Withdrawn: CommandReleaseLease found the ID waiting and took it out
	// of its queue.
	Withdrawn bool
	// Waiting is how many requests wait in the group's queue after the
	// command.
	Waiting int64
	// WaitedNanos is the cluster time the request spent in its queue: from
	// the entry that queued it to the one that granted it a slot or took it
	// out, or to this command while it waits. It is 0 for a request
	// answered at once, granted or refused, and for a held lease it is the
	// wait before its grant, whichever command answers with it.
	WaitedNanos int64
	// Key and Max name a renewed lease's group.
	Key string
	Max int64
	// GrantedAtNanos is, for a held lease (Granted), the cluster time it
	// was granted at: the command's own time for a new grant, the first
	// grant's for a retried acquire answered with the lease it holds. The
	// lease's TTL runs from it. Last, so that results from nodes without
	// it decode (as 0: not known).
	GrantedAtNanos int64
}

// leaseGroup is the key and the maximum a lease counts against: like a
// (key, limit) pair, the same key with another maximum is another group.
type leaseGroup struct {
	key string
	max int64
}

type lease struct {
	id        string
	group     leaseGroup
	owner     string // whose it is (LeaseCommand.Owner)
	expiresAt int64
	grantedAt int64
	waited    int64 // in the queue, before grantedAt
	// claimTTL, for a lease granted from the queue that its waiter's node
	// has not claimed yet, is the request's TTL, longer than the claim
	// window it lasts until then; 0 when there is nothing to claim.
	claimTTL int64
	// index[0] is the lease's place in the table's expiry heap, index[1]
	// its place in its group's heap.
	index [2]int
}

// leasesByExpiry is a heap of leases by (expiry, ID), so expiry never
// depends on history or map order; which says which of a lease's places it
// keeps them in (0: the table's expiry heap, 1: its group's).
func leasesByExpiry(which int) *orderedHeap[lease] {
	return newOrderedHeap(func(a, b *lease) int {
		return cmp.Or(cmp.Compare(a.expiresAt, b.expiresAt), strings.Compare(a.id, b.id))
	}, func(l *lease) *int { return &l.index[which] })
}

// leaseTable is the FSM's leases: by ID, by group (a heap each, so the
// earliest expiry of a full group is at hand), and one expiry heap; and the
// requests waiting for a slot (leasequeue.go).
type leaseTable struct {
	byID   map[string]*lease
	groups map[leaseGroup]*orderedHeap[lease]
	// maxesOf lists, per key, the maxima of its groups (a key has few), so
	// a key's leases are found without a walk over every group. A group
	// with waiters is always full, so it is listed.
	maxesOf map[string][]int64
	expiry  *orderedHeap[lease]

	waiters   map[string]*waiter
	queues    map[leaseGroup]*list.List // of *waiter, first come first
	deadlines *orderedHeap[waiter]
	// events are the grants and departures of waiters since the FSM last
	// took them.
	events []LeaseEvent
	// owned counts, per owner other than "", its leases and waiters.
	owned map[string]int64
}

func newLeaseTable() *leaseTable {
	return &leaseTable{byID: map[string]*lease{}, groups: map[leaseGroup]*orderedHeap[lease]{}, maxesOf: map[string][]int64{},
		expiry: leasesByExpiry(0), waiters: map[string]*waiter{}, queues: map[leaseGroup]*list.List{}, owned: map[string]int64{},
		deadlines: waitersByDeadline()}
}

// own counts one more (delta 1) or one fewer (-1) lease or waiter of owner.
func (t *leaseTable) own(owner string, delta int64) {
	if owner == "" {
		return
	}
	if t.owned[owner] += delta; t.owned[owner] <= 0 {
		delete(t.owned, owner)
	}
}

// validOwner checks the caller named in a lease command: at most
// contract.MaxScopeBytes, as a request ID's scope.
func validOwner(owner string) *contract.Error {
	if len(owner) > contract.MaxScopeBytes {
		return contract.Invalid("owner", "a lease's owner is at most %d bytes", contract.MaxScopeBytes)
	}
	return nil
}

// mayActOn refuses a renewal or a release of owner's lease or waiter by a
// caller who is not its owner, unless the command may act on any.
func mayActOn(owner string, cmd *LeaseCommand) *contract.Error {
	if cmd.AnyOwner || owner == cmd.Owner {
		return nil
	}
	return contract.Denied("id", "lease %q is held for another caller: only its holder, or an admin, may renew or give it back", cmd.ID)
}

func (t *leaseTable) active(g leaseGroup) int64 {
	if h := t.groups[g]; h != nil {
		return int64(h.len())
	}
	return 0
}

func (t *leaseTable) add(l *lease) {
	t.byID[l.id] = l
	t.own(l.owner, 1)
	h := t.groups[l.group]
	if h == nil {
		h = leasesByExpiry(1)
		t.groups[l.group] = h
		t.maxesOf[l.group.key] = append(t.maxesOf[l.group.key], l.group.max)
	}
	h.add(l)
	t.expiry.add(l)
}

// validateLease checks a lease's ID and request as the contract does.
func validateLease(id string, req contract.LeaseRequest) *contract.Error {
	if err := contract.ValidateLeaseID(id); err != nil {
		return err
	}
	return req.Validate()
}

// expire takes out, up to max in all, the waiters whose deadline has come
// by now, then the leases that have expired by now, and gives the slots
// these free to the remaining waiters. Everything an entry decides, it
// decides at its own time: a waiter is granted a slot only by an entry
// stamped before its deadline, so a slot that expired at E but is first
// applied at now goes to the first waiters still waiting at now (the
// tick loop appends an entry at E, so in a healthy cluster now is E).
func (t *leaseTable) expire(now int64, max int) {
	n := 0
	for w := t.deadlines.first(); n < max && w != nil && w.deadline <= now; w, n = t.deadlines.first(), n+1 {
		t.leave(w, now, false)
	}
	var freed []leaseGroup
	for l := t.expiry.first(); n < max && l != nil && l.expiresAt <= now; l, n = t.expiry.first(), n+1 {
		t.drop(l)
		if t.waiting(l.group) > 0 && !slices.Contains(freed, l.group) {
			freed = append(freed, l.group)
		}
	}
	for _, g := range freed {
		t.grantWaiters(g, now)
	}
}

// drop removes a lease from every index.
func (t *leaseTable) drop(l *lease) {
	delete(t.byID, l.id)
	t.own(l.owner, -1)
	t.expiry.remove(l)
	h := t.groups[l.group]
	h.remove(l)
	if h.len() == 0 {
		delete(t.groups, l.group)
		maxes := slices.DeleteFunc(t.maxesOf[l.group.key], func(m int64) bool { return m == l.group.max })
		if len(maxes) == 0 {
			delete(t.maxesOf, l.group.key)
		} else {
			t.maxesOf[l.group.key] = maxes
		}
	}
}

// held returns the leases of key live at now, in every group, ordered by
// maximum, then expiry, then ID.
func (t *leaseTable) held(key string, now int64) []contract.HeldLease {
	var out []contract.HeldLease
	for _, m := range t.maxesOf[key] {
		for _, l := range t.groups[leaseGroup{key, m}].all() {
			if l.expiresAt <= now { // expired, not yet dropped (expire's bound)
				continue
			}
			out = append(out, contract.HeldLease{ID: l.id, Key: key, Max: m, ExpiresAtNanos: l.expiresAt})
		}
	}
	slices.SortFunc(out, func(a, b contract.HeldLease) int {
		return cmp.Or(cmp.Compare(a.Max, b.Max), cmp.Compare(a.ExpiresAtNanos, b.ExpiresAtNanos), strings.Compare(a.ID, b.ID))
	})
	return out
}

// acquire grants a free slot of the command's group, or queues the command
// behind the group's waiters, or refuses it.
func (t *leaseTable) acquire(now int64, cmd *LeaseCommand) LeaseResult {
	req := contract.LeaseRequest{Key: cmd.Key, Max: cmd.Max, TTL: time.Duration(cmd.TTLNanos), MaxWait: time.Duration(cmd.MaxWaitNanos), MaxQueue: cmd.MaxQueue}
	if err := validateLease(cmd.ID, req); err != nil {
		return LeaseResult{Rejection: err}
	}
	if err := validOwner(cmd.Owner); err != nil {
		return LeaseResult{Rejection: err}
	}
	g := leaseGroup{cmd.Key, cmd.Max}
	if r, group, known := t.resultOf(cmd.ID, now); known {
		if group != g {
			return LeaseResult{Rejection: contract.Invalid("id", "lease %q is held or waits for another key or max", cmd.ID)}
		}
		return r // a retry: the lease it holds, or the place it has
	}
	full := t.active(g) >= cmd.Max
	if full && (cmd.MaxWaitNanos == 0 || t.waiting(g) >= cmd.MaxQueue) {
		return LeaseResult{Active: t.active(g), Waiting: t.waiting(g), RetryAfterNanos: t.retryAfter(g, now)}
	}
	if cmd.Owner != "" && cmd.MaxOwnerLeases > 0 && t.owned[cmd.Owner] >= cmd.MaxOwnerLeases {
		return LeaseResult{Rejection: contract.Exhausted("caller %q holds %d leases and waiting lease requests, the most one caller may hold at once on this cluster: give some back first", cmd.Owner, t.owned[cmd.Owner])}
	}
	if len(t.byID)+len(t.waiters) >= contract.MaxLeases {
		return LeaseResult{Rejection: contract.Exhausted("the cluster holds its maximum of %d leases and waiters", contract.MaxLeases)}
	}
	if full {
		w := &waiter{id: cmd.ID, group: g, owner: cmd.Owner, ttl: cmd.TTLNanos, enqueuedAt: now, deadline: now + cmd.MaxWaitNanos}
		t.enqueue(w)
		return t.queued(w, t.waiting(g), now)
	}
	l := &lease{id: cmd.ID, group: g, owner: cmd.Owner, expiresAt: now + cmd.TTLNanos, grantedAt: now}
	t.add(l)
	return t.heldResult(l)
}

// heldResult answers for a held lease: granted, with its grant's time and
// wait and its expiry as they stand.
func (t *leaseTable) heldResult(l *lease) LeaseResult {
	return LeaseResult{Granted: true, Active: t.active(l.group), Waiting: t.waiting(l.group), ExpiresAtNanos: l.expiresAt,
		GrantedAtNanos: l.grantedAt, WaitedNanos: l.waited}
}

// resultOf answers for an ID the table knows: held (Granted, with its
// grant's time and its expiry) or waiting (Queued, with its place), with
// its group.
func (t *leaseTable) resultOf(id string, now int64) (LeaseResult, leaseGroup, bool) {
	if l := t.byID[id]; l != nil {
		return t.heldResult(l), l.group, true
	}
	if w := t.waiters[id]; w != nil {
		return t.queued(w, t.position(w), now), w.group, true
	}
	return LeaseResult{}, leaseGroup{}, false
}

// renew moves a held lease's expiry to the command's TTL from now, or, for
// a claim, to its request's TTL from its grant.
func (t *leaseTable) renew(now int64, cmd *LeaseCommand) LeaseResult {
	if err := contract.ValidateLeaseID(cmd.ID); err != nil {
		return LeaseResult{Rejection: err}
	}
	if err := contract.ValidateLeaseTTL(time.Duration(cmd.TTLNanos)); err != nil {
		return LeaseResult{Rejection: err}
	}
	l := t.byID[cmd.ID]
	if l == nil || l.expiresAt <= now { // expired, though not yet dropped (expire's bound)
		return LeaseResult{Rejection: contract.NotFound("id", "no lease %q (given back already, or expired)", cmd.ID)}
	}
	if err := mayActOn(l.owner, cmd); err != nil {
		return LeaseResult{Rejection: err}
	}
	switch {
	case !cmd.Claim:
		l.expiresAt, l.claimTTL = now+cmd.TTLNanos, 0 // the holder's own expiry supersedes a claim
	case l.claimTTL > 0:
		l.expiresAt, l.claimTTL = l.grantedAt+l.claimTTL, 0
	}
	t.expiry.fix(l)
	t.groups[l.group].fix(l)
	r := t.heldResult(l)
	r.Key, r.Max = l.group.key, l.group.max
	return r
}

// release gives a lease back, its slot going to the group's first waiter,
// or withdraws a waiter from its queue; with WaiterOnly, a lease live at
// now is kept and answered as held.
func (t *leaseTable) release(now int64, cmd *LeaseCommand) LeaseResult {
	id := cmd.ID
	if w := t.waiters[id]; w != nil {
		if err := mayActOn(w.owner, cmd); err != nil {
			return LeaseResult{Rejection: err}
		}
		return t.leave(w, now, true)
	}
	l := t.byID[id]
	if l == nil {
		return LeaseResult{Rejection: contract.NotFound("id", "no lease %q (given back already, or expired)", id)}
	}
	if err := mayActOn(l.owner, cmd); err != nil {
		return LeaseResult{Rejection: err}
	}
	if cmd.WaiterOnly && l.expiresAt > now {
		return t.heldResult(l)
	}
	t.drop(l)
	t.grantWaiters(l.group, now)
	return LeaseResult{Released: true, Active: t.active(l.group), Waiting: t.waiting(l.group)}
}

// leaseRecord is a lease in a snapshot.
type leaseRecord struct {
	ID        string
	Key       string
	Max       int64
	ExpiresAt int64
	// Owner comes last: a snapshot written before it restores leases
	// that are nobody's in particular.
	Owner string
	// GrantedAt, Waited and ClaimTTL are the lease's grant time, its wait
	// in the queue before, and the TTL its claim gives it (0: nothing to
	// claim). Last, as Owner: a snapshot written before them restores
	// leases whose grant time is not known (0) and that are claimed.
	GrantedAt int64
	Waited    int64
	ClaimTTL  int64
}

// record is l as a snapshot holds it.
func (l *lease) record() leaseRecord {
	return leaseRecord{ID: l.id, Key: l.group.key, Max: l.group.max, ExpiresAt: l.expiresAt, Owner: l.owner,
		GrantedAt: l.grantedAt, Waited: l.waited, ClaimTTL: l.claimTTL}
}

func (t *leaseTable) restore(rec leaseRecord) error {
	if err := validateLease(rec.ID, contract.LeaseRequest{Key: rec.Key, Max: rec.Max, TTL: contract.MinLeaseTTL}); err != nil {
		return fmt.Errorf("lease %q: %w", rec.ID, err)
	}
	g := leaseGroup{rec.Key, rec.Max}
	if t.byID[rec.ID] != nil || t.active(g) >= rec.Max || len(t.byID) >= contract.MaxLeases {
		return fmt.Errorf("lease %q: repeated, or over its maximum", rec.ID)
	}
	if len(rec.Owner) > contract.MaxScopeBytes {
		return fmt.Errorf("lease %q: its owner's name is too long", rec.ID)
	}
	if rec.GrantedAt < 0 || rec.GrantedAt > rec.ExpiresAt || rec.Waited < 0 || rec.Waited > int64(contract.MaxLeaseWait) ||
		(rec.ClaimTTL != 0 && (contract.ValidateLeaseTTL(time.Duration(rec.ClaimTTL)) != nil || rec.GrantedAt == 0)) {
		return fmt.Errorf("lease %q: grant time, wait or claim out of range", rec.ID)
	}
	t.add(&lease{id: rec.ID, group: g, owner: rec.Owner, expiresAt: rec.ExpiresAt, grantedAt: rec.GrantedAt, waited: rec.Waited, claimTTL: rec.ClaimTTL})
	return nil
}
