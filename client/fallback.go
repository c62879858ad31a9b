package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// FailurePolicy says what a Guard answers when the cluster cannot decide:
// no node reachable, 503 (no leader, outcome unknown, key cap), a timeout.
// Fail open keeps the API available but drops the protection; fail closed
// protects the resource but turns a limiter outage into an API outage; a
// local limiter keeps an approximate limit.
type FailurePolicy int

const (
	// FailClosed denies while the cluster cannot decide.
	FailClosed FailurePolicy = iota
	// FailOpen allows while the cluster cannot decide.
	FailOpen
	// FailLocal decides with an in-process limiter: each process enforces
	// its share of the limit (rate and burst divided by Replicas), so the
	// replicas together stay close to the global limit. Requests naming a
	// policy, which only the cluster knows, fail closed.
	FailLocal
)

// Guard asks the cluster for decisions and applies a FailurePolicy when it
// cannot get one. A 4xx answer is the caller's mistake and is returned as an
// error, never papered over.
type Guard struct {
	client   *Client
	policy   FailurePolicy
	replicas int
	clock    func() time.Time
	local    *localLimiter
}

// GuardOptions configures a Guard.
type GuardOptions struct {
	// OnFailure is the policy when the cluster cannot decide. Default
	// FailClosed.
	OnFailure FailurePolicy
	// Replicas is how many processes share the limit while falling back
	// locally (FailLocal); each enforces 1/Replicas of it. Default 1.
	Replicas int
	// MaxLocalKeys bounds the local limiter's memory; when it is full the
	// local state is dropped and starts over (more permissive for a
	// moment, never unbounded). Default 100,000.
	MaxLocalKeys int
	// Clock is the local limiter's clock. Default time.Now.
	Clock func() time.Time
}

// NewGuard returns a Guard over c.
func NewGuard(c *Client, opts GuardOptions) *Guard {
	if opts.Replicas < 1 {
		opts.Replicas = 1
	}
	if opts.MaxLocalKeys < 1 {
		opts.MaxLocalKeys = 100_000
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &Guard{client: c, policy: opts.OnFailure, replicas: opts.Replicas, clock: opts.Clock,
		local: &localLimiter{max: opts.MaxLocalKeys, states: map[localKey]algorithms.State{}}}
}

// GuardDecision is a Guard's answer.
type GuardDecision struct {
	Decision
	// Degraded is true when the cluster could not decide and the
	// FailurePolicy answered; Cause says why.
	Degraded bool
	Cause    error
}

// Allow asks the cluster; if it cannot decide, the FailurePolicy answers:
// no node answered, a 5xx, an answer that is not one (ErrMalformedAnswer).
// The error is non-nil only for a request the API refused as invalid (4xx
// other than 429), which no policy should hide.
func (g *Guard) Allow(ctx context.Context, req AllowRequest) (GuardDecision, error) {
	d, err := g.client.Allow(ctx, req)
	if err == nil {
		return GuardDecision{Decision: d}, nil
	}
	if isRefusal(err) {
		return GuardDecision{}, err
	}
	out := GuardDecision{Degraded: true, Cause: err}
	now := g.clock()
	switch g.policy {
	case FailOpen:
		out.Allowed = true
	case FailLocal:
		d, invalid := g.local.decide(req, g.replicas, now)
		if invalid != nil {
			return GuardDecision{}, invalid
		}
		out.Decision = d
	}
	out.ResetAt = resetAt(now, out.ResetAfter)
	if out.Allowed {
		out.StatusCode = http.StatusOK
	} else {
		out.StatusCode = http.StatusTooManyRequests
	}
	return out, nil
}

// isRefusal reports whether err is the API's refusal of the request as it
// stands (a 4xx), which no FailurePolicy hides; anything else (5xx, a
// status the API does not answer, no answer, a malformed one) means the
// cluster could not decide.
func isRefusal(err error) bool {
	var apiErr *Error
	return errors.As(err, &apiErr) && apiErr.StatusCode >= 400 && apiErr.StatusCode < 500
}

type localKey struct {
	key   string
	limit algorithms.Limit
}

// localLimiter is the in-process fallback: the same algorithms as the
// cluster, on this process's clock, for this process's share of a limit.
type localLimiter struct {
	mu     sync.Mutex
	max    int
	states map[localKey]algorithms.State
}

// decide answers req from this process's share of its limits. A request
// the cluster would refuse as invalid is refused the same way (an *Error
// with status 400), with the same rule; a check naming a policy, which only
// the cluster knows, is denied.
func (l *localLimiter) decide(req AllowRequest, replicas int, now time.Time) (Decision, error) {
	checks, err := contractChecks(req)
	if err != nil {
		return Decision{}, err
	}
	type planned struct {
		id   localKey
		next algorithms.State
	}
	var plan []planned
	out := Decision{Allowed: true}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range checks {
		if c.Policy != "" {
			return Decision{StatusCode: http.StatusTooManyRequests}, nil // unknown locally: fail closed
		}
		limit := shareOf(c.Limit, replicas)
		if contract.ValidateLimit(limit) != nil {
			// The share refills too slowly to be decided exactly: deny.
			return Decision{StatusCode: http.StatusTooManyRequests}, nil
		}
		cost := min(c.Consumes(), limit.Capacity())
		id := localKey{c.Key, limit}
		d, next := algorithms.Decide(limit, l.states[id], now.UnixNano(), cost)
		if !d.Allowed {
			out.Allowed = false
			out.ExactRetryAfter = max(out.ExactRetryAfter, millis(inMillis(d.RetryAfter)))
		}
		if out.Limit == 0 || d.Remaining < out.Remaining {
			out.Limit, out.Remaining = d.Limit, d.Remaining
			out.ResetAfter = millis(inMillis(d.ResetAfter))
		}
		plan = append(plan, planned{id, next})
	}
	if out.Allowed {
		if len(l.states)+len(plan) > l.max {
			clear(l.states)
		}
		for _, p := range plan {
			l.states[p.id] = p.next
		}
	}
	return out, nil
}

// contractChecks validates req as the cluster does and returns its checks.
func contractChecks(req AllowRequest) ([]contract.Check, error) {
	inline := req.Checks == nil
	checks := req.Checks
	if inline {
		checks = []Check{{Key: req.Key, Limit: req.Limit, Policy: req.Policy, Dimensions: req.Dimensions, Cost: req.Cost, Peek: req.Peek}}
	}
	cr := contract.Request{RequestID: req.RequestID}
	for i, c := range checks {
		out := contract.Check{Key: c.Key, Policy: c.Policy, Cost: c.Cost, Peek: c.Peek}
		if c.Limit != nil {
			l, err := c.Limit.spec().Limit()
			if err != nil {
				return nil, invalidRequest(err.Within(fmt.Sprintf("checks[%d].limit", i)), inline)
			}
			out.Limit = l
		}
		for name, value := range c.Dimensions {
			out.Dimensions = append(out.Dimensions, contract.Dimension{Name: name, Value: value})
		}
		cr.Checks = append(cr.Checks, out)
	}
	if err := cr.Validate(); err != nil {
		return nil, invalidRequest(err, inline)
	}
	return cr.Checks, nil
}

// invalidRequest is the error the API would answer for a request the
// contract refuses: a 400 naming the field as the body spelled it.
func invalidRequest(err *contract.Error, inline bool) *Error {
	field := err.Field
	if inline {
		if f, ok := strings.CutPrefix(field, "checks[0]"); ok {
			field = strings.TrimPrefix(f, ".")
		}
	}
	return &Error{StatusCode: http.StatusBadRequest, Code: string(err.Code), Field: field, Message: err.Message}
}

// spec is the limit in the contract's terms: zero values are "not given".
func (lim *Limit) spec() contract.LimitSpec {
	s := contract.LimitSpec{Algorithm: lim.Algorithm, Rate: &lim.Rate}
	if lim.Period != 0 {
		period := lim.Period.String()
		s.Period = &period
	}
	if lim.Burst != 0 {
		s.Burst = &lim.Burst
	}
	return s
}

// shareOf divides a valid limit among replicas (at least 1 unit each).
func shareOf(l algorithms.Limit, replicas int) algorithms.Limit {
	share := func(v int64) int64 { return max(v/int64(replicas), 1) }
	l.Rate = share(l.Rate)
	if l.Algorithm.IsBucket() {
		l.Burst = share(l.Burst)
	}
	return l
}
