package contract

import "github.com/limitnode/limitnode/algorithms"

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
	// HeldNanos is how long the serving node waited out the request's
	// reservation before answering (the HTTP API's hold); the checks'
	// WaitNanos are then zero.
	HeldNanos int64
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
}

// CheckDecision is the decision on one check.
type CheckDecision struct {
	algorithms.Decision
	// PeriodNanos is the period of the limit it was decided under, and
	// Rate that limit's rate per period (the quota the RateLimit-Policy
	// header advertises; for a bucket, Limit is its capacity).
	PeriodNanos int64
	Rate        int64
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
