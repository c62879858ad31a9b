package contract

import (
	"fmt"
	"strings"
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

// Bounds on allow requests.
const (
	// MaxKeyBytes bounds a key, given or made from a policy's template.
	MaxKeyBytes = 512
	// MaxRequestIDBytes bounds a request ID.
	MaxRequestIDBytes = 64
	// MaxScopeBytes bounds the scope of a request ID.
	MaxScopeBytes = 128
	// MaxChecks is the most checks one request may combine atomically.
	MaxChecks = 32
	// MaxBatchSize is the most requests of one batch.
	MaxBatchSize = 1000
	// MaxBatchChecks is the most checks all requests of one batch hold
	// together: what one call may ask the cluster to decide at once.
	MaxBatchChecks = 4096
	// MaxDimensions bounds the dimensions of a check and the placeholders
	// of a key template.
	MaxDimensions = 16
	// MaxDimensionNameBytes bounds a dimension's name (a placeholder).
	MaxDimensionNameBytes = 64
	// MaxDimensionBytes bounds a dimension's value.
	MaxDimensionBytes = 256
)

// Check is one limit check: Cost against a limit on a key, or with Peek
// a look at what the key has left without consuming. The limit is
// Limit, or the named Policy's, which the cluster resolves when it applies
// the request (so every node uses the policy as it stands at that point).
// With a policy that has a key template, Dimensions make the key instead of
// Key.
type Check struct {
	Key        string
	Limit      algorithms.Limit
	Policy     string
	Dimensions []Dimension
	// Cost is what the check consumes when allowed; 0 means 1.
	Cost int64
	// Peek checks without consuming: the decision says whether a cost of
	// 0 is admitted and what the key has left, and nothing changes. Cost
	// must then be 0.
	Peek bool
	// LocalShares, for an inline limit, lets nodes decide the key from
	// shares of its budget (a policy says so itself).
	LocalShares *LocalShares
}

// Dimension is one named part of a key, for a policy's key template: the
// template "{tenant}:{route}" with dimensions tenant=t-7 and route=/export
// makes the key "t-7:/export".
type Dimension struct {
	Name  string
	Value string
}

// Request asks the cluster to admit every check's cost atomically: all are
// admitted and consumed, or none is.
type Request struct {
	Checks []Check
	// RequestID, optional, makes the request safe to retry: for a few
	// minutes of cluster time the same request with the same ID is
	// answered with the first decision and consumes nothing more. Another
	// request with that ID is refused (CodeConflict).
	RequestID string
	// Scope, optional, is whose the request ID is (the HTTP API puts the
	// API token's name here): IDs of different scopes never meet, so no
	// caller can use, or spoil, the IDs another will send.
	Scope string
	// MaxWait, from 0 to algorithms.MaxWait, lets the request be
	// admitted now as a reservation when every check would admit it within
	// that time (see algorithms.Reserve); the decision then says how long
	// to wait. Every check must use a bucket algorithm.
	MaxWait time.Duration
	// SettleTTL, when not 0, charges the admission up front, a settlement to
	// settle (SettleRequest) within that time; see validateSettle.
	SettleTTL time.Duration
	// Share, optional, asks for a share of the one check's budget besides
	// its cost, for the caller to spend itself (Decision.Share).
	Share *ShareRequest
}

// Validate checks everything that can be checked before policies are
// resolved. A field of a check is named under "checks[i]"; the HTTP API
// names the fields of a check given inline at the top level instead.
func (r *Request) Validate() *Error {
	if len(r.RequestID) > MaxRequestIDBytes {
		return Invalid("request_id", "request_id must be at most %d bytes", MaxRequestIDBytes)
	}
	if len(r.Scope) > MaxScopeBytes || strings.IndexByte(r.Scope, 0) >= 0 {
		return Invalid("request_id", "the scope of a request ID is at most %d bytes, without NUL", MaxScopeBytes)
	}
	if r.MaxWait < 0 || r.MaxWait > algorithms.MaxWait {
		return Invalid("max_wait", "max_wait must be from 0 to %s", algorithms.MaxWait)
	}
	if len(r.Checks) == 0 || len(r.Checks) > MaxChecks {
		return Invalid("checks", "checks must hold 1 to %d checks", MaxChecks)
	}
	for i := range r.Checks {
		c := &r.Checks[i]
		if err := c.Validate(); err != nil {
			return err.Within(checkField(i))
		}
		if r.MaxWait > 0 && c.Policy == "" && !c.Limit.Algorithm.IsBucket() {
			return MaxWaitNeedsABucket(i, len(r.Checks), c.Limit.Algorithm)
		}
		for j := range i {
			if prev := &r.Checks[j]; prev.Key == c.Key && prev.Limit == c.Limit && prev.Policy == c.Policy && len(c.Dimensions) == 0 {
				return Invalid(checkField(i)+".key", "checks[%d] and checks[%d] name the same key and limit", j, i)
			}
		}
	}
	if r.Share != nil {
		if err := r.Share.Validate(r); err != nil {
			return err
		}
	}
	return r.validateSettle()
}

// checkField is the JSON path of a request's i-th check.
// MaxWaitNeedsABucket refuses max_wait on a request whose check i (of
// checks) is decided by alg, a window: only the bucket algorithms and GCRA
// can admit by reservation. A policy's algorithm is known only where the
// policy is applied, so the FSM refuses with this too.
func MaxWaitNeedsABucket(i, checks int, alg algorithms.Algorithm) *Error {
	which := "the limit is"
	if checks > 1 {
		which = fmt.Sprintf("checks[%d] is", i)
	}
	return Invalid("max_wait", "max_wait needs token_bucket, leaky_bucket or gcra; %s %s", which, alg)
}

func checkField(i int) string { return fmt.Sprintf("checks[%d]", i) }

// Consumes is what the check consumes when allowed: 0 for a peek, 1 for a
// Cost of 0, else Cost.
func (c *Check) Consumes() int64 {
	switch {
	case c.Peek:
		return 0
	case c.Cost == 0:
		return 1
	}
	return c.Cost
}

// Validate checks one check on its own.
func (c *Check) Validate() *Error {
	if c.Cost < 0 {
		return Invalid("cost", "cost must not be negative")
	}
	if err := ValidatePeek(c.Peek, c.Cost); err != nil {
		return err
	}
	if c.Policy != "" {
		return c.validatePolicyCheck()
	}
	if len(c.Dimensions) > 0 {
		return Invalid("dimensions", "dimensions go with a policy that has a key_template")
	}
	if err := ValidateKey(c.Key); err != nil {
		return err
	}
	if err := ValidateLimit(c.Limit); err != nil {
		return err.Within("limit")
	}
	if err := c.LocalShares.Validate(c.Limit); err != nil {
		return err.Within("limit")
	}
	return ValidateCost(c.Limit, c.Consumes())
}

// ValidatePeek refuses a peek with a cost: a peek consumes nothing.
func ValidatePeek(peek bool, cost int64) *Error {
	if peek && cost != 0 {
		return Invalid("cost", "a peek consumes nothing: give cost 0 with it")
	}
	return nil
}

func (c *Check) validatePolicyCheck() *Error {
	if c.Limit != (algorithms.Limit{}) || c.LocalShares != nil {
		return Invalid("limit", "give a limit or a policy, not both")
	}
	if err := ValidatePolicyName(c.Policy); err != nil {
		return Invalid("policy", "%s", err.Message)
	}
	switch {
	case len(c.Dimensions) > 0 && c.Key != "":
		return Invalid("dimensions", "give a key or dimensions, not both")
	case len(c.Dimensions) == 0 && (c.Key == "" || len(c.Key) > MaxKeyBytes):
		return Invalid("key", "key (or dimensions, for a policy with a key_template) is required; a key is 1 to %d bytes", MaxKeyBytes)
	}
	return validateDimensions(c.Dimensions)
}

// ValidateKey checks a key: 1 to MaxKeyBytes bytes.
func ValidateKey(key string) *Error {
	if key == "" || len(key) > MaxKeyBytes {
		return Invalid("key", "key is required and must be 1 to %d bytes", MaxKeyBytes)
	}
	return nil
}

// validateDimensions checks a check's dimensions on their own: at most
// MaxDimensions, each name once and within the size bounds.
func validateDimensions(dims []Dimension) *Error {
	if len(dims) > MaxDimensions {
		return Invalid("dimensions", "dimensions must hold 1 to %d names", MaxDimensions)
	}
	for i, d := range dims {
		if d.Name == "" || len(d.Name) > MaxDimensionNameBytes || len(d.Value) > MaxDimensionBytes {
			return Invalid("dimensions", "dimension names are 1 to %d bytes, values at most %d", MaxDimensionNameBytes, MaxDimensionBytes)
		}
		for _, prev := range dims[:i] {
			if prev.Name == d.Name {
				return Invalid("dimensions", "dimension %q is given twice", d.Name)
			}
		}
	}
	return nil
}

// ValidateBatchSize checks the size of a batch: 1 to MaxBatchSize requests
// holding at most MaxBatchChecks checks in all.
func ValidateBatchSize(requests, checks int) *Error {
	if requests == 0 || requests > MaxBatchSize {
		return Invalid("requests", "requests must hold 1 to %d requests", MaxBatchSize)
	}
	if checks > MaxBatchChecks {
		return Invalid("requests", "the requests of a batch hold at most %d checks in all, not %d", MaxBatchChecks, checks)
	}
	return nil
}
