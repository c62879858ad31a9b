package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

// FailurePolicy says what a Guard answers when the cluster cannot decide:
// no node reachable, 503 (no leader, outcome unknown, key cap), a timeout.
// The seeds' choice: fail open keeps the API available but drops the
// protection; fail closed protects the resource but turns a limiter outage
// into an API outage; a local limiter keeps an approximate limit.
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

// Allow asks the cluster; if it cannot decide, the FailurePolicy answers.
// The error is non-nil only for a request the API refused as invalid (4xx
// other than 429), which no policy should hide.
func (g *Guard) Allow(ctx context.Context, req AllowRequest) (GuardDecision, error) {
	d, err := g.client.Allow(ctx, req)
	if err == nil {
		return GuardDecision{Decision: d}, nil
	}
	var apiErr *Error
	if errors.As(err, &apiErr) && apiErr.StatusCode < 500 {
		return GuardDecision{}, err
	}
	out := GuardDecision{Degraded: true, Cause: err}
	switch g.policy {
	case FailOpen:
		out.Allowed = true
	case FailLocal:
		out.Decision = g.local.decide(req, g.replicas, g.clock())
	}
	if out.Allowed {
		out.StatusCode = http.StatusOK
	} else {
		out.StatusCode = http.StatusTooManyRequests
	}
	return out, nil
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

func (l *localLimiter) decide(req AllowRequest, replicas int, now time.Time) Decision {
	checks := req.Checks
	if checks == nil {
		checks = []Check{{Key: req.Key, Limit: req.Limit, Policy: req.Policy, Dimensions: req.Dimensions, Cost: req.Cost}}
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
		limit, err := shareOf(c.Limit, replicas)
		if err != nil || c.Policy != "" {
			return Decision{StatusCode: http.StatusTooManyRequests} // unknown locally: fail closed
		}
		cost := int64(1)
		if c.Cost != nil {
			cost = *c.Cost
		}
		cost = min(cost, limit.Capacity())
		id := localKey{c.Key, limit}
		d, next := algorithms.Decide(limit, l.states[id], now.UnixNano(), cost)
		if !d.Allowed {
			out.Allowed = false
			out.RetryAfterMS = max(out.RetryAfterMS, (d.RetryAfterNanos+int64(time.Millisecond)-1)/int64(time.Millisecond))
		}
		if out.Limit == 0 || d.Remaining < out.Remaining {
			out.Limit, out.Remaining = d.Limit, d.Remaining
			out.ResetAfterMS = (d.ResetAfterNanos + int64(time.Millisecond) - 1) / int64(time.Millisecond)
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
	return out
}

// shareOf converts an API limit into algorithms' form and divides it among
// replicas (at least 1 unit each).
func shareOf(lim *Limit, replicas int) (algorithms.Limit, error) {
	if lim == nil {
		return algorithms.Limit{}, errors.New("no inline limit")
	}
	alg, err := algorithms.ParseAlgorithm(lim.Algorithm)
	if err != nil {
		return algorithms.Limit{}, err
	}
	period := time.Second
	if lim.Period != "" {
		if period, err = time.ParseDuration(lim.Period); err != nil {
			return algorithms.Limit{}, err
		}
	}
	share := func(v int64) int64 { return max(v/int64(replicas), 1) }
	l := algorithms.Limit{Algorithm: alg, Rate: share(lim.Rate), PeriodNanos: int64(period)}
	if alg.IsBucket() {
		burst := lim.Burst
		if burst == 0 {
			burst = lim.Rate
		}
		l.Burst = share(burst)
	}
	if err := l.Validate(); err != nil {
		return algorithms.Limit{}, fmt.Errorf("local limit: %w", err)
	}
	return l, nil
}
