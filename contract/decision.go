package contract

import (
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

// Decision is the cluster's answer to a Request.
type Decision struct {
	// Allowed is true when every check not in shadow mode allowed, and all
	// consumed.
	Allowed bool
	// Checks has one decision per check, in order. When Allowed is false,
	// a check that would have allowed on its own is reported as it stands
	// (it consumed nothing).
	Checks []CheckDecision
	// Duplicate is true when the answer is the first decision for a
	// request ID seen before.
	Duplicate bool
	// AtNanos is the cluster time (Unix ns, the leader's clock, never
	// running backwards) at which the request was decided.
	AtNanos int64
	// Leader is the ID of the leader whose Raft entry decided the request
	// (this node's, or the one a follower forwarded it to).
	Leader string
	// Held is how long the serving node waited out the request's
	// reservation before answering (the HTTP API's hold); the checks'
	// Wait are then zero.
	Held time.Duration
	// Leased is true for a denial the node answered from a deny lease,
	// repeating one the leader made moments before, without asking: no
	// leader decided it now (Leader is ""), AtNanos is the latest cluster
	// time it may be, and the checks' waits are the first denial's less
	// the time since; what remains may have changed since, by what others
	// consumed or what refilled.
	Leased bool
	// Shared is true for an admission the node answered from a share of
	// the key's budget it holds (see LocalShares): no leader decided it
	// now (Leader is ""); Remaining is what the key had left for others
	// when the share was granted plus what the node still holds, so it
	// is off by what others admitted or what refilled since (at most the
	// share's TTL ago).
	Shared bool
	// Blocked, for a denial because a key is blocked, names the check it
	// denied and the block (the reason, when it ends, and the policy
	// whose penalty imposed it, if one did).
	Blocked *BlockedCheck
	// DeniedBy, for a denial, says what denied it.
	DeniedBy *DeniedBy
	// SettlementID, for an admission of a request with SettleTTL,
	// names its open settlement, to settle (SettleRequest).
	SettlementID string
	// Share is the share granted to the request's Share ask, if any.
	Share *GrantedShare
}

// The causes of a denial (DeniedBy.Cause).
const (
	// CauseLimit: the check's limit had not enough left.
	CauseLimit = "limit"
	// CauseBlock: an operator blocked the check's key.
	CauseBlock = "block"
	// CausePenalty: the check's key is blocked by a policy's penalty.
	CausePenalty = "penalty"
)

// DeniedBy says what denied a request: which check, under which policy,
// limit and version of the policy, and why. Of several checks that deny, it
// names the one that frees up last (the first of those that tie).
type DeniedBy struct {
	// Check is the index of the check (for an Envoy rate limit service
	// query, of the descriptor) that denied.
	Check int
	// Policy is the policy whose limit the check was decided under: its
	// name, "rls/" and the domain for a descriptor's limit, or "" for an
	// inline limit.
	Policy string
	// PolicyVersion is the log index of the last change of that policy
	// (or domain): two denials with the same version were decided under
	// the same rules. 0 for an inline limit.
	PolicyVersion uint64
	// Limit is the limit that applied to the check (for a policy, the
	// override of its key if it has one).
	Limit algorithms.Limit
	// Cause is CauseLimit, CauseBlock or CausePenalty.
	Cause string
}

// CheckDecision is the decision on one check.
type CheckDecision struct {
	algorithms.Decision
	// Period is the period of the limit it was decided under, and
	// Rate that limit's rate per period (the quota the RateLimit-Policy
	// header advertises; for a bucket, Limit is its capacity).
	Period time.Duration
	Rate   int64
	// Key is the key a policy's template made from the dimensions, or "".
	Key string
	// Shadow is true for a policy in shadow mode: the check never denies.
	Shadow bool
}

// BatchResult is the outcome of one request of a batch: a decision, or the
// error that request alone met.
type BatchResult struct {
	Decision Decision
	Err      error
}
