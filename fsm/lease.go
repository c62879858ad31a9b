package fsm

import (
	"cmp"
	"container/heap"
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
// (CommandReleaseLease, only ID) a lease. The ID is chosen by the node that
// received the request, so a retried acquire with the same ID is answered
// with the lease it already holds.
type LeaseCommand struct {
	NowNanos int64
	ID       string
	Key      string
	Max      int64
	TTLNanos int64
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
	expiresAt int64
	// index[0] is the lease's place in the table's expiry heap, index[1]
	// its place in its group's heap.
	index [2]int
}

// leaseHeap orders leases by (expiry, ID), so expiry never depends on
// history or map order. which says which of a lease's indexes it keeps.
type leaseHeap struct {
	leases []*lease
	which  int
}

func (h *leaseHeap) Len() int { return len(h.leases) }
func (h *leaseHeap) Less(i, j int) bool {
	a, b := h.leases[i], h.leases[j]
	if a.expiresAt != b.expiresAt {
		return a.expiresAt < b.expiresAt
	}
	return a.id < b.id
}
func (h *leaseHeap) Swap(i, j int) {
	h.leases[i], h.leases[j] = h.leases[j], h.leases[i]
	h.leases[i].index[h.which] = i
	h.leases[j].index[h.which] = j
}
func (h *leaseHeap) Push(x any) {
	l := x.(*lease)
	l.index[h.which] = len(h.leases)
	h.leases = append(h.leases, l)
}
func (h *leaseHeap) Pop() any {
	l := h.leases[len(h.leases)-1]
	h.leases[len(h.leases)-1] = nil
	h.leases = h.leases[:len(h.leases)-1]
	return l
}

// leaseTable is the FSM's leases: by ID, by group (a heap each, so the
// earliest expiry of a full group is at hand), and one expiry heap.
type leaseTable struct {
	byID   map[string]*lease
	groups map[leaseGroup]*leaseHeap
	// maxesOf lists, per key, the maxima of its groups (a key has few), so
	// a key's leases are found without a walk over every group.
	maxesOf map[string][]int64
	expiry  leaseHeap
}

func newLeaseTable() *leaseTable {
	return &leaseTable{byID: map[string]*lease{}, groups: map[leaseGroup]*leaseHeap{}, maxesOf: map[string][]int64{}}
}

func (t *leaseTable) active(g leaseGroup) int64 {
	if h := t.groups[g]; h != nil {
		return int64(h.Len())
	}
	return 0
}

func (t *leaseTable) add(l *lease) {
	t.byID[l.id] = l
	h := t.groups[l.group]
	if h == nil {
		h = &leaseHeap{which: 1}
		t.groups[l.group] = h
		t.maxesOf[l.group.key] = append(t.maxesOf[l.group.key], l.group.max)
	}
	heap.Push(h, l)
	heap.Push(&t.expiry, l)
}

// validateLease checks an acquire command as the contract does.
func validateLease(id, key string, maxHolders, ttlNanos int64) *contract.Error {
	if err := contract.ValidateLeaseID(id); err != nil {
		return err
	}
	r := contract.LeaseRequest{Key: key, Max: maxHolders, TTL: time.Duration(ttlNanos)}
	return r.Validate()
}

func (t *leaseTable) expire(now int64, max int) {
	for n := 0; n < max && t.expiry.Len() > 0 && t.expiry.leases[0].expiresAt <= now; n++ {
		t.drop(t.expiry.leases[0])
	}
}

// drop removes a lease from every index.
func (t *leaseTable) drop(l *lease) {
	delete(t.byID, l.id)
	heap.Remove(&t.expiry, l.index[0])
	h := t.groups[l.group]
	heap.Remove(h, l.index[1])
	if h.Len() == 0 {
		delete(t.groups, l.group)
		maxes := slices.DeleteFunc(t.maxesOf[l.group.key], func(m int64) bool { return m == l.group.max })
		if len(maxes) == 0 {
			delete(t.maxesOf, l.group.key)
		} else {
			t.maxesOf[l.group.key] = maxes
		}
	}
}

// held returns the leases of key, in every group, ordered by maximum, then
// expiry, then ID.
func (t *leaseTable) held(key string) []contract.HeldLease {
	var out []contract.HeldLease
	for _, m := range t.maxesOf[key] {
		for _, l := range t.groups[leaseGroup{key, m}].leases {
			out = append(out, contract.HeldLease{ID: l.id, Key: key, Max: m, ExpiresAtNanos: l.expiresAt})
		}
	}
	slices.SortFunc(out, func(a, b contract.HeldLease) int {
		return cmp.Or(cmp.Compare(a.Max, b.Max), cmp.Compare(a.ExpiresAtNanos, b.ExpiresAtNanos), strings.Compare(a.ID, b.ID))
	})
	return out
}

func (t *leaseTable) acquire(now int64, cmd *LeaseCommand) LeaseResult {
	if err := validateLease(cmd.ID, cmd.Key, cmd.Max, cmd.TTLNanos); err != nil {
		return LeaseResult{Rejection: err}
	}
	g := leaseGroup{cmd.Key, cmd.Max}
	if l := t.byID[cmd.ID]; l != nil {
		if l.group != g {
			return LeaseResult{Rejection: contract.Invalid("id", "lease %q is held for another key or max", cmd.ID)}
		}
		return LeaseResult{Granted: true, Active: t.active(g), ExpiresAtNanos: l.expiresAt}
	}
	if t.active(g) >= cmd.Max {
		earliest := t.groups[g].leases[0].expiresAt
		return LeaseResult{Active: t.active(g), RetryAfterNanos: max(earliest-now, 1)}
	}
	if len(t.byID) >= contract.MaxLeases {
		return LeaseResult{Rejection: contract.Exhausted("the cluster holds its maximum of %d leases", contract.MaxLeases)}
	}
	l := &lease{id: cmd.ID, group: g, expiresAt: now + cmd.TTLNanos}
	t.add(l)
	return LeaseResult{Granted: true, Active: t.active(g), ExpiresAtNanos: l.expiresAt}
}

func (t *leaseTable) release(id string) LeaseResult {
	l := t.byID[id]
	if l == nil {
		return LeaseResult{Rejection: contract.NotFound("id", "no lease %q (given back already, or expired)", id)}
	}
	t.drop(l)
	return LeaseResult{Released: true, Active: t.active(l.group)}
}

// leaseRecord is a lease in a snapshot.
type leaseRecord struct {
	ID        string
	Key       string
	Max       int64
	ExpiresAt int64
}

func (t *leaseTable) restore(rec leaseRecord) error {
	if err := validateLease(rec.ID, rec.Key, rec.Max, int64(contract.MinLeaseTTL)); err != nil {
		return fmt.Errorf("lease %q: %w", rec.ID, err)
	}
	g := leaseGroup{rec.Key, rec.Max}
	if t.byID[rec.ID] != nil || t.active(g) >= rec.Max || len(t.byID) >= contract.MaxLeases {
		return fmt.Errorf("lease %q: repeated, or over its maximum", rec.ID)
	}
	t.add(&lease{id: rec.ID, group: g, expiresAt: rec.ExpiresAt})
	return nil
}
