package fsm

import (
	"slices"

	"github.com/limitnode/limitnode/contract"
)

// Reads of the applied state, for the node's queries: they lock the FSM
// and change nothing.

// NodeHTTPAddr returns the HTTP address recorded for a member, or "".
func (f *FSM) NodeHTTPAddr(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[id]
}

// PoliciesPage returns up to limit policies named after after, sorted by
// name, stopping early once they hold maxOverrides overrides (at least one
// policy); next is the name to continue after, or "" at the end.
func (f *FSM) PoliciesPage(after string, limit, maxOverrides int) (page []contract.PolicyStatus, next string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.policies))
	for name := range f.policies {
		if name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	overrides := 0
	for i, name := range names {
		e := f.policies[name]
		if len(page) == limit || (len(page) > 0 && overrides+len(e.policy.Overrides) > maxOverrides) {
			return page, names[i-1]
		}
		page = append(page, e.status())
		overrides += len(e.policy.Overrides)
	}
	return page, ""
}

// Policy returns the named policy.
func (f *FSM) Policy(name string) (contract.PolicyStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.policies[name]
	if e == nil {
		return contract.PolicyStatus{}, false
	}
	return e.status(), true
}

// NextLeaseDue returns the earliest cluster time at which a lease queue
// changes by time alone, and whether one will: not while nobody waits.
func (f *FSM) NextLeaseDue() (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leases.nextDue()
}

// LeaseOf returns what the state says of a lease ID: held (the result
// Granted, with its expiry), waiting (Queued, with its place), or neither.
func (f *FSM) LeaseOf(id string) LeaseResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, _, _ := f.leases.resultOf(id, f.nowNanos)
	r.AtNanos = f.nowNanos
	return r
}

// Leases returns the leases held on key and the requests waiting for one,
// as of cluster time atNanos (never before the latest applied: a lease that
// has expired by then is left out), and that time.
func (f *FSM) Leases(key string, atNanos int64) (int64, []contract.HeldLease, []contract.QueuedLease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := max(atNanos, f.nowNanos)
	return now, f.leases.held(key, now), f.leases.queuedOn(key)
}

// Damaged returns the index of the first entry this FSM refused because its
// checksum failed (a damaged disk), or 0.
func (f *FSM) Damaged() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.damagedAt
}

// Stats describes the size of the state, for status pages and tests.
type Stats struct {
	// Keys is the number of (key, limit) pairs with state.
	Keys int
	// RequestIDs is the number of request IDs remembered.
	RequestIDs int
	// NowNanos is the latest cluster time applied.
	NowNanos int64
	// Leases and LeaseWaiters are the leases held and the requests
	// waiting in lease queues.
	Leases       int
	LeaseWaiters int
}

// Stats returns the current size of the state.
func (f *FSM) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{Keys: f.buckets.len(), RequestIDs: len(f.dedup), NowNanos: f.nowNanos, Leases: len(f.leases.byID), LeaseWaiters: len(f.leases.waiters)}
}
