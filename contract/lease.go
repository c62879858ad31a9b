package contract

import (
	"strings"
	"time"
)

// Bounds on concurrency leases.
const (
	// MaxLeaseIDBytes bounds a lease's ID.
	MaxLeaseIDBytes = 64
	// MaxLeaseHolders bounds a lease group's maximum of holders.
	MaxLeaseHolders = 1_000_000
	// MinLeaseTTL and MaxLeaseTTL bound how long a lease may be held.
	MinLeaseTTL = time.Millisecond
	MaxLeaseTTL = 24 * time.Hour
	// MaxLeases bounds the live leases and queued waiters of the whole
	// cluster.
	MaxLeases = 1_000_000
	// MaxLeaseWait bounds how long a lease request may wait in its
	// group's queue (LeaseRequest.MaxWait).
	MaxLeaseWait = 10 * time.Minute
	// MaxLeaseQueue bounds LeaseRequest.MaxQueue, the waiters a group's
	// queue may hold.
	MaxLeaseQueue = 10_000
)

// LeaseRequest asks for one of Max concurrent slots of Key, for at most TTL.
// With MaxWait, a request that finds every slot held waits for one in the
// group's FIFO queue, if fewer than MaxQueue others wait there.
type LeaseRequest struct {
	Key string
	Max int64
	TTL time.Duration
	// MaxWait, 0 to MaxLeaseWait, is how long the request may wait in
	// the queue, counted in cluster time; 0 answers at once.
	MaxWait time.Duration
	// MaxQueue, 1 to MaxLeaseQueue with MaxWait (0 without), is the
	// longest queue the request joins: with MaxQueue waiters already
	// there it is refused at once.
	MaxQueue int64
}

// Validate checks a lease request.
func (r *LeaseRequest) Validate() *Error {
	if err := ValidateKey(r.Key); err != nil {
		return err
	}
	if r.Max < 1 || r.Max > MaxLeaseHolders {
		return Invalid("max", "max must be an integer from 1 to %d", MaxLeaseHolders)
	}
	if err := ValidateLeaseTTL(r.TTL); err != nil {
		return err
	}
	if r.MaxWait < 0 || r.MaxWait > MaxLeaseWait {
		return Invalid("max_wait", "max_wait must be a Go duration from 0 to %s", MaxLeaseWait)
	}
	switch {
	case r.MaxWait > 0 && (r.MaxQueue < 1 || r.MaxQueue > MaxLeaseQueue):
		return Invalid("max_queue", "max_queue must be an integer from 1 to %d with max_wait", MaxLeaseQueue)
	case r.MaxWait == 0 && r.MaxQueue != 0:
		return Invalid("max_queue", "max_queue needs max_wait: a request that does not wait joins no queue")
	}
	return nil
}

// ValidateLeaseTTL checks how long a lease is held for: from MinLeaseTTL to
// MaxLeaseTTL.
func ValidateLeaseTTL(ttl time.Duration) *Error {
	if ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return Invalid("ttl", "ttl must be a Go duration from %s to %s", MinLeaseTTL, MaxLeaseTTL)
	}
	return nil
}

// ValidateLeaseID checks a lease's ID: 1 to MaxLeaseIDBytes bytes, without
// "/" or spaces (it appears in a URL path).
func ValidateLeaseID(id string) *Error {
	if id == "" || len(id) > MaxLeaseIDBytes || strings.ContainsAny(id, "/ ") {
		return Invalid("id", "a lease ID is 1 to %d bytes without / or spaces", MaxLeaseIDBytes)
	}
	return nil
}

// Lease is a held concurrency lease: one of Max slots of Key, until it is
// given back or ExpiresAtNanos passes.
type Lease struct {
	ID  string
	Key string
	Max int64
	// Granted is false when all slots were taken (and, with MaxWait, the
	// queue was full or the wait ran out); RetryAfter then says when
	// the earliest holder's lease expires.
	Granted bool
	// Active is how many slots are held after this request.
	Active         int64
	ExpiresAtNanos int64
	RetryAfter     time.Duration
	// AtNanos is the cluster time of the decision.
	AtNanos int64
	// Waiting is how many requests wait in the group's queue after the
	// decision.
	Waiting int64
	// Waited is the cluster time the request spent in the queue.
	Waited time.Duration
}

// QueuedLease is a request waiting in a lease group's queue, as the
// cluster holds it.
type QueuedLease struct {
	ID  string
	Key string
	Max int64
	// Position is the request's place in its group's queue, from 1.
	Position int64
	// DeadlineNanos is the cluster time at which it leaves the queue
	// without a slot.
	DeadlineNanos int64
}

// HeldLease is a lease as the cluster holds it.
type HeldLease struct {
	ID             string
	Key            string
	Max            int64
	ExpiresAtNanos int64
}
