// Package middleware limits the requests of a net/http service with a
// limitnode cluster: the inner layer of limits, after authentication, keyed
// by user, API key, client address and route, with a quota and a cost per
// route. Every replica of the service asks the same cluster through a
// client.Guard (whose failure policy applies when the cluster cannot
// decide), so three replicas hold one limit, not three.
//
// A denied request is answered 429 with the headers and JSON body of the
// cluster's /v1/allow answer; an allowed one gets the RateLimit headers on
// its response and goes on to the handler.
package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/limitnode/limitnode/client"
)

// Check is one limit a request is counted against. The checks of a request
// are decided together, atomically: all are charged or none.
type Check struct {
	// Name identifies the check for Charge; optional, unique in its list.
	Name string
	// Key builds the check's key from the request. Required.
	Key KeyFunc
	// Limit is an inline limit; Policy names a stored policy instead.
	// Exactly one of the two.
	Limit  *client.Limit
	Policy string
	// Cost is what one request consumes; 0 means 1.
	Cost int64
}

// Options configures a Limiter.
type Options struct {
	// Routes maps a ServeMux pattern, exactly as registered ("POST
	// /export", "GET /users/{id}"), to the checks of the requests that
	// match it.
	Routes map[string][]Check
	// Default holds the checks of a request whose pattern has no entry in
	// Routes (or that matches no pattern); none means such requests are
	// not limited.
	Default []Check
	// Mux finds a request's pattern when the Limiter wraps the whole
	// ServeMux: a ServeMux sets Request.Pattern only once it routes the
	// request, after the Limiter has run. Leave it nil when wrapping the
	// handlers registered on a mux, which see the pattern already.
	Mux *http.ServeMux
	// OnKeyError answers a request whose key cannot be built. Default: 401
	// for ErrNoKey, 400 for another error, each with a JSON error body.
	OnKeyError func(w http.ResponseWriter, r *http.Request, err error)
	// Timeout bounds the wait for the cluster's decision; past it the
	// Guard's failure policy answers. Default 2s.
	Timeout time.Duration
	// Logger receives what the middleware cannot answer for (a check the
	// cluster refuses as invalid: a mistake in Options). Default
	// slog.Default().
	Logger *slog.Logger
}

// Limiter is the middleware: Wrap a handler with it.
type Limiter struct {
	guard  *client.Guard
	opts   Options
	routes map[string]*route
	dflt   *route
}

// route is a list of checks made ready once: each check's cost is given
// by address to every request.
type route struct {
	checks []Check
	costs  []int64
}

func newRoute(checks []Check) *route {
	rt := &route{checks: checks, costs: make([]int64, len(checks))}
	for i, c := range checks {
		rt.costs[i] = max(c.Cost, 1)
	}
	return rt
}

// request turns the route's checks into one multi-check request for r.
func (rt *route) request(r *http.Request) (client.AllowRequest, error) {
	req := client.AllowRequest{Checks: make([]client.Check, len(rt.checks))}
	for i, c := range rt.checks {
		key, err := c.Key(r)
		if err != nil {
			return client.AllowRequest{}, err
		}
		req.Checks[i] = client.Check{Key: key, Limit: c.Limit, Policy: c.Policy, Cost: &rt.costs[i]}
	}
	return req, nil
}

// New returns a Limiter that asks guard. It refuses Options with a check
// that has no key, both or neither of Limit and Policy, a negative cost, or
// a name used twice in one list.
func New(guard *client.Guard, opts Options) (*Limiter, error) {
	if guard == nil {
		return nil, errors.New("middleware: a client.Guard is required")
	}
	lists := map[string][]Check{"Default": opts.Default}
	for pattern, checks := range opts.Routes {
		lists[fmt.Sprintf("Routes[%q]", pattern)] = checks
	}
	for where, checks := range lists {
		names := map[string]bool{}
		for i, c := range checks {
			switch {
			case c.Key == nil:
				return nil, fmt.Errorf("middleware: %s[%d]: Key is required", where, i)
			case (c.Limit == nil) == (c.Policy == ""):
				return nil, fmt.Errorf("middleware: %s[%d]: give exactly one of Limit and Policy", where, i)
			case c.Cost < 0:
				return nil, fmt.Errorf("middleware: %s[%d]: Cost must not be negative", where, i)
			case c.Name != "" && names[c.Name]:
				return nil, fmt.Errorf("middleware: %s[%d]: Name %q is used twice", where, i, c.Name)
			}
			names[c.Name] = true
		}
	}
	if opts.OnKeyError == nil {
		opts.OnKeyError = answerKeyError
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Limiter{guard: guard, opts: opts, routes: map[string]*route{}, dflt: newRoute(opts.Default)}
	for pattern, checks := range opts.Routes {
		l.routes[pattern] = newRoute(checks)
	}
	return l, nil
}

// Wrap returns next behind the limits.
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pattern := r.Pattern
		if pattern == "" && l.opts.Mux != nil {
			_, pattern = l.opts.Mux.Handler(r)
		}
		rt, ok := l.routes[pattern]
		if !ok {
			rt = l.dflt
		}
		if len(rt.checks) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		// One shallow copy: it knows its pattern (for Route) and carries
		// what Charge needs to the handler.
		a := &admitted{limiter: l, checks: rt.checks}
		routed := r.WithContext(context.WithValue(r.Context(), admittedKey{}, a))
		routed.Pattern = pattern
		req, err := rt.request(routed)
		if err != nil {
			l.opts.OnKeyError(w, r, err)
			return
		}
		a.request = req
		d, err := l.decide(r.Context(), req)
		if err != nil {
			l.opts.Logger.Error("the cluster refused the middleware's checks as invalid: fix the middleware's Options", "pattern", pattern, "err", err)
			writeJSONError(w, http.StatusInternalServerError, "internal", "the rate limit of this route is misconfigured")
			return
		}
		if !d.Allowed {
			writeDenial(w, d)
			return
		}
		copyHeaders(w.Header(), d, false)
		next.ServeHTTP(w, routed)
	})
}

func (l *Limiter) decide(ctx context.Context, req client.AllowRequest) (client.GuardDecision, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	return l.guard.Allow(ctx, req)
}

// answerKeyError is the default Options.OnKeyError.
func answerKeyError(w http.ResponseWriter, _ *http.Request, err error) {
	if errors.Is(err, ErrNoKey) {
		writeJSONError(w, http.StatusUnauthorized, "unauthenticated", err.Error())
		return
	}
	writeJSONError(w, http.StatusBadRequest, "invalid_argument", err.Error())
}

// writeJSONError answers with the API's error body.
func writeJSONError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}{message, code})
}
