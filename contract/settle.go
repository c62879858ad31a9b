package contract

import (
	"fmt"
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

// Bounds on settlements (charged up front, settled later).
const (
	// MinSettleTTL and MaxSettleTTL bound how long a settlement may wait
	// for its settlement.
	MinSettleTTL = time.Second
	MaxSettleTTL = time.Hour
	// MaxSettlements bounds the settlements the cluster holds open, and
	// the settled ones it remembers.
	MaxSettlements = 100_000
	// MaxSettlementsPerCaller bounds the settlements one caller (an API
	// token) holds open, so that it takes four callers at their bound to
	// fill the cluster's. Without tokens every caller is one, and the
	// cluster's bound is its own.
	MaxSettlementsPerCaller = MaxSettlements / 4
	// MaxSettlementIDBytes bounds a settlement's ID.
	MaxSettlementIDBytes = 64
	// SettledMemory is how long, in cluster time, a settlement is
	// remembered after it was settled or its TTL ended: a retry of
	// it is answered with the first settlement, another is refused.
	SettledMemory = 5 * time.Minute
)

// A request with SettleTTL is charged its cost up front, the most it may cost,
// and is settled later with what it used (SettleRequest): what it did not
// use is given back, what it used beyond is charged, up to the policy's
// MaxDebt beyond empty. A settlement not settled within its TTL stays
// charged in full.

// validateSettle checks a request's settle option: a TTL from MinSettleTTL
// to MaxSettleTTL, without max_wait, every check charging one cost of 1
// or more (the settlement's cost then applies to each).
func (r *Request) validateSettle() *Error {
	if r.SettleTTL == 0 {
		return nil
	}
	if d := r.SettleTTL; d < MinSettleTTL || d > MaxSettleTTL {
		return Invalid("settle.ttl", "settle.ttl must be a Go duration from %s to %s", MinSettleTTL, MaxSettleTTL)
	}
	if r.MaxWait > 0 {
		return Invalid("settle", "settle and max_wait do not go together")
	}
	if r.Share != nil {
		return Invalid("settle", "settle and take_share do not go together")
	}
	for i := range r.Checks {
		if c := r.Checks[i].Consumes(); c < 1 || c != r.Checks[0].Consumes() {
			return Invalid("settle", "a request to settle reserves one cost of 1 or more on every check; checks[%d] costs %d", i, c)
		}
	}
	return nil
}

// SettleRequest settles an open settlement: ID is the settlement_id its
// admission answered, Cost what the request used, Scope whose the
// settlement is (as a request ID's: the HTTP API's token name).
type SettleRequest struct {
	ID    string
	Cost  int64
	Scope string
}

// Validate checks a settle request.
func (s *SettleRequest) Validate() *Error {
	switch {
	case s.ID == "" || len(s.ID) > MaxSettlementIDBytes:
		return Invalid("settlement_id", "settlement_id is required, at most %d bytes", MaxSettlementIDBytes)
	case s.Cost < 0 || s.Cost > algorithms.MaxRate:
		return Invalid("cost", "cost must be from 0 to %d", int64(algorithms.MaxRate))
	case len(s.Scope) > MaxScopeBytes:
		return Invalid("settlement_id", "the scope of a settlement is at most %d bytes", MaxScopeBytes)
	}
	return nil
}

// Settlement is what a settlement did: the cost charged up front (Upfront)
// and the cost settled, the units given back (Refunded) or charged beyond
// the up-front charge (Charged; what the debt bound left out is Forgiven),
// each the least over the settlement's checks, and, when a check is left in
// debt, how long until it admits again (RetryAfter). Duplicate: the
// settlement was settled with this cost before, and this is that answer.
type Settlement struct {
	ID                          string
	Upfront, Cost               int64
	Refunded, Charged, Forgiven int64
	RetryAfter                  time.Duration
	AtNanos                     int64
	Duplicate                   bool
}

// ValidateMaxDebt checks a policy's MaxDebt: from 0 to its limit's
// capacity, and for the bucket algorithms only (a window takes no debt).
func ValidateMaxDebt(debt int64, l algorithms.Limit) *Error {
	switch {
	case debt == 0:
		return nil
	case !l.Algorithm.IsBucket():
		return Invalid("max_debt", "max_debt needs token_bucket, leaky_bucket or gcra; the limit is %s", l.Algorithm)
	case debt < 0 || debt > l.Capacity():
		return Invalid("max_debt", "max_debt must be from 0 to the limit's capacity, %d", l.Capacity())
	}
	return nil
}

// SettleField names the settle option of a batch's i-th request, for
// errors.
func SettleField(i int) string { return fmt.Sprintf("requests[%d].settle", i) }
