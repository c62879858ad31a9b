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
	// MaxLeases bounds the live leases of the whole cluster.
	MaxLeases = 1_000_000
)

// LeaseRequest asks for one of Max concurrent slots of Key, for at most TTL.
type LeaseRequest struct {
	Key string
	Max int64
	TTL time.Duration
}

// Validate checks a lease request.
func (r *LeaseRequest) Validate() *Error {
	if err := ValidateKey(r.Key); err != nil {
		return err
	}
	if r.Max < 1 || r.Max > MaxLeaseHolders {
		return Invalid("max", "max must be an integer from 1 to %d", MaxLeaseHolders)
	}
	if r.TTL < MinLeaseTTL || r.TTL > MaxLeaseTTL {
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

// HeldLease is a lease as the cluster holds it.
type HeldLease struct {
	ID             string
	Key            string
	Max            int64
	ExpiresAtNanos int64
}
