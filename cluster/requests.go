package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/fsm"
)

// Policy types are the FSM's: a policy is stored as it is given.
type (
	// Policy is a named limit stored in the cluster; see fsm.Policy.
	Policy = fsm.Policy
	// Override is one key's own limit within a policy.
	Override = fsm.Override
	// PolicyStatus is a stored policy with its shadow-mode count.
	PolicyStatus = fsm.PolicyStatus
	// Dimension is one named part of a key, for a policy's key template.
	Dimension = fsm.Dimension
)

// Check is one limit check: Cost against a limit on a key. The limit is
// Limit, or the named Policy's (resolved when the cluster applies the
// request, so every node uses the policy as it stands at that point). With
// a policy that has a key template, Dimensions make the key instead of Key.
type Check struct {
	Key        string
	Limit      algorithms.Limit
	Policy     string
	Dimensions map[string]string
	Cost       int64
}

// Request asks the cluster to admit every check's cost atomically: all are
// admitted and consumed, or none is.
type Request struct {
	Checks []Check
	// RequestID, optional and at most 64 bytes, makes the request safe to
	// retry: for fsm.DedupWindow a request with the same ID is answered
	// with the first decision and consumes nothing more.
	RequestID string
}

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
}

// CheckDecision is the decision on one check.
type CheckDecision struct {
	algorithms.Decision
	// PeriodNanos is the period of the limit it was decided under.
	PeriodNanos int64
	// Key is the key a policy's template made from the dimensions, or "".
	Key string
	// Shadow is true for a policy in shadow mode: the check never denies.
	Shadow bool
}

// RejectedError is a request the cluster refused as it stands. It wraps
// ErrInvalid, ErrNotFound or ErrKeyLimit; Field names the field at fault in the HTTP
// API's terms ("limit.rate", "checks[1].policy"), when one is.
type RejectedError struct {
	Field   string
	Message string
	cause   error
}

// Error returns the reason the cluster gave.
func (e *RejectedError) Error() string { return e.Message }

// Unwrap returns ErrInvalid or ErrNotFound.
func (e *RejectedError) Unwrap() error { return e.cause }

func rejected(r *fsm.Rejection) error {
	cause := ErrInvalid
	switch r.Code {
	case fsm.CodeNotFound:
		cause = ErrNotFound
	case fsm.CodeKeyLimit:
		cause = ErrKeyLimit
	}
	return &RejectedError{Field: r.Field, Message: r.Message, cause: cause}
}

// Allow decides req. It returns a *RejectedError (ErrInvalid or ErrNotFound)
// for a request refused as it stands, ErrNoLeader when no leader answered in
// time, ErrOutcomeUnknown when the request may or may not have been decided,
// and ErrShutdown after Close.
func (n *Node) Allow(ctx context.Context, req Request) (Decision, error) {
	fr, err := req.toFSM()
	if err != nil {
		return Decision{}, err
	}
	results, leader, err := n.decide(ctx, []fsm.Request{fr})
	if err != nil {
		return Decision{}, err
	}
	return decisionOf(results[0], leader)
}

// BatchResult is the outcome of one request of a batch: a decision, or the
// error that request alone met.
type BatchResult struct {
	Decision Decision
	Err      error
}

// MaxBatchSize bounds the requests of one AllowBatch call.
const MaxBatchSize = 1000

// AllowBatch decides independent requests together: one message to the
// leader and one Raft entry (unless it exceeds MaxBatchRequests). Each
// request is atomic on its own; a bad request gets its own error and does
// not spoil the others. The error returned is for the batch as a whole
// (too large, no leader, outcome unknown).
func (n *Node) AllowBatch(ctx context.Context, reqs []Request) ([]BatchResult, error) {
	if len(reqs) == 0 || len(reqs) > MaxBatchSize {
		return nil, &RejectedError{Field: "requests", Message: fmt.Sprintf("a batch holds 1 to %d requests", MaxBatchSize), cause: ErrInvalid}
	}
	out := make([]BatchResult, len(reqs))
	var valid []fsm.Request
	var index []int
	for i, r := range reqs {
		fr, err := r.toFSM()
		if err != nil {
			out[i].Err = err
			continue
		}
		valid = append(valid, fr)
		index = append(index, i)
	}
	if len(valid) == 0 {
		return out, nil
	}
	results, leader, err := n.decide(ctx, valid)
	if err != nil {
		return nil, err
	}
	for j, r := range results {
		out[index[j]].Decision, out[index[j]].Err = decisionOf(r, leader)
	}
	return out, nil
}

func decisionOf(r fsm.Result, leader string) (Decision, error) {
	if r.Rejection != nil {
		return Decision{}, rejected(r.Rejection)
	}
	d := Decision{Allowed: r.Allowed, Duplicate: r.Duplicate, AtNanos: r.AtNanos, Leader: leader, Checks: make([]CheckDecision, len(r.Checks))}
	for i, c := range r.Checks {
		d.Checks[i] = CheckDecision{Decision: c.Decision, PeriodNanos: c.PeriodNanos, Key: c.Key, Shadow: c.Shadow}
	}
	return d, nil
}

// toFSM validates what can be validated without the replicated state
// (policies are resolved when the request is applied) and builds the FSM's
// form of the request.
func (req Request) toFSM() (fsm.Request, error) {
	fr := fsm.Request{RequestID: req.RequestID, Checks: make([]fsm.Check, len(req.Checks))}
	for i, c := range req.Checks {
		if c.Policy != "" {
			dims := make([]fsm.Dimension, 0, len(c.Dimensions))
			for name, value := range c.Dimensions {
				dims = append(dims, fsm.Dimension{Name: name, Value: value})
			}
			slices.SortFunc(dims, func(a, b fsm.Dimension) int { return strings.Compare(a.Name, b.Name) })
			fr.Checks[i] = fsm.NewPolicyCheck(c.Key, c.Policy, dims, c.Cost)
			continue
		}
		if len(c.Dimensions) > 0 {
			return fsm.Request{}, &RejectedError{Field: "dimensions", Message: "dimensions need a policy with a key template", cause: ErrInvalid}
		}
		fr.Checks[i] = fsm.NewCheck(c.Key, c.Limit, c.Cost)
	}
	if err := fr.Validate(); err != nil {
		return fsm.Request{}, rejected(err)
	}
	return fr, nil
}

// PutPolicy creates or replaces a policy. Keys limited by an earlier version
// keep their usage, converted to the new limit (see algorithms.Convert).
func (n *Node) PutPolicy(ctx context.Context, p Policy) error {
	if err := fsm.ValidatePolicy(&p); err != nil {
		return rejected(err)
	}
	return n.leaderOp(ctx, &forwardRequest{Op: opPutPolicy, Policy: p}, func() error {
		return n.applyCommand(fsm.CommandPutPolicy, &p)
	})
}

// DeletePolicy deletes a policy; ErrNotFound if there is none by that name.
// State of keys it limited expires as usual.
func (n *Node) DeletePolicy(ctx context.Context, name string) error {
	if err := fsm.ValidatePolicyName(name); err != nil {
		return rejected(err)
	}
	return n.leaderOp(ctx, &forwardRequest{Op: opDeletePolicy, Policy: Policy{Name: name}}, func() error {
		return n.applyCommand(fsm.CommandDeletePolicy, &fsm.NamedDeleteCommand{Name: name})
	})
}

// Policies returns every policy as this node has applied them, sorted by
// name. A follower may lag the leader by a few entries.
func (n *Node) Policies() []PolicyStatus { return n.fsm.Policies() }

// Policy returns the named policy as this node has applied it.
func (n *Node) Policy(name string) (PolicyStatus, bool) { return n.fsm.Policy(name) }
