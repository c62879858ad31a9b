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
	"github.com/limitnode/limitnode/client/internal/limitcheck"
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
	// request, after the Limiter has run. Wrap(mux) sets it when nil; set
	// it when the mux is wrapped in something else first. Key functions
	// then see the pattern but no path values (Request.PathValue is
	// empty): for keys of path values, wrap each handler instead.
	Mux *http.ServeMux
	// OnKeyError answers a request whose key cannot be built. Default: 401
	// for ErrNoKey, 400 for another error, each with a JSON error body.
	OnKeyError func(w http.ResponseWriter, r *http.Request, err error)
	// Timeout bounds the wait for the cluster's decision; past it the
	// Guard's failure policy answers. Default 2s.
	Timeout time.Duration
	// SettleTTL, when not 0 (1s to 1h), charges every admission
	// its checks' cost up front, the most a request may cost, for
	// the handler to settle with what it used (Settle) within that time;
	// one it does not settle stays charged in full. Every list of checks
	// must then cost the same on each of its checks.
	SettleTTL time.Duration
	// Logger receives what the middleware cannot answer for (a check the
	// cluster refuses as invalid: a mistake in Options). Default
	// slog.Default().
	Logger *slog.Logger
}

// Limiter is the middleware: Wrap a handler with it.
type Limiter struct {
	decider limitcheck.Decider
	opts    Options
	routes  *limitcheck.Table[*http.Request]
}

// New returns a Limiter that asks guard. It refuses Options with a check
// that has no key, both or neither of Limit and Policy, a negative cost, or
// a name used twice in one list.
func New(guard *client.Guard, opts Options) (*Limiter, error) {
	if guard == nil {
		return nil, errors.New("middleware: a client.Guard is required")
	}
	routes, err := limitcheck.NewTable("Routes", opts.Default, opts.Routes, func(c Check) limitcheck.Check[*http.Request] {
		return limitcheck.Check[*http.Request]{Name: c.Name, Key: c.Key, Limit: c.Limit, Policy: c.Policy, Cost: c.Cost}
	})
	if err != nil {
		return nil, fmt.Errorf("middleware: %w", err)
	}
	if opts.SettleTTL != 0 {
		if err := routes.OneCostEach("Routes"); err != nil {
			return nil, fmt.Errorf("middleware: %w", err)
		}
	}
	l := &Limiter{routes: routes}
	if opts.OnKeyError == nil {
		opts.OnKeyError = answerKeyError
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l.opts, l.decider = opts, limitcheck.Decider{Guard: guard, Timeout: opts.Timeout}
	return l, nil
}

// Wrap returns next behind the limits. Wrapping a *http.ServeMux finds
// each request's pattern in it (see Options.Mux).
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	mux := l.opts.Mux
	if m, ok := next.(*http.ServeMux); ok && mux == nil {
		mux = m
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pattern := r.Pattern
		if pattern == "" && mux != nil {
			_, pattern = mux.Handler(r)
		}
		checks := l.routes.Lookup(pattern)
		if checks.Empty() {
			next.ServeHTTP(w, r)
			return
		}
		// One shallow copy: it knows its pattern (for Route) and carries
		// what Charge needs to the handler.
		a := &limitcheck.Admitted[*http.Request]{Decider: l.decider, Checks: checks}
		routed := r.WithContext(context.WithValue(r.Context(), admittedKey{}, a))
		routed.Pattern = pattern
		req, err := checks.Request(routed)
		if err != nil {
			l.opts.OnKeyError(w, r, err)
			return
		}
		req.SettleTTL = l.opts.SettleTTL
		a.Request = req
		d, err := l.decider.Decide(r.Context(), req)
		if err != nil {
			l.opts.Logger.Error("the cluster refused the middleware's checks as invalid: fix the middleware's Options", "pattern", pattern, "err", err)
			writeJSONError(w, http.StatusInternalServerError, "internal", "the rate limit of this route is misconfigured")
			return
		}
		if !d.Allowed {
			writeDenial(w, d)
			return
		}
		a.Decision = d
		setHeaders(w.Header(), d, false)
		next.ServeHTTP(w, routed)
	})
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
