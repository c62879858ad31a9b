// Package grpclimit limits the calls of a gRPC server with a limitnode
// cluster: unary and stream server interceptors that key each method's
// checks by caller (metadata, the authenticated user, the peer address) and
// method, ask the cluster through a client.Guard (whose failure policy
// applies when the cluster cannot decide), and refuse a denied call with
// RESOURCE_EXHAUSTED. It is package middleware's counterpart for gRPC, with
// the method in place of the route.
package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/client/internal/limitcheck"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Check is one limit a call is counted against. The checks of a call are
// decided together, atomically: all are charged or none.
type Check struct {
	// Name identifies the check for Charge; optional, unique in its list.
	Name string
	// Key builds the check's key from the call. Required.
	Key KeyFunc
	// Limit is an inline limit; Policy names a stored policy instead.
	// Exactly one of the two.
	Limit  *client.Limit
	Policy string
	// Cost is what one call consumes; 0 means 1.
	Cost int64
}

// Options configures a Limiter.
type Options struct {
	// Methods maps a full method name ("/package.Service/Method") to the
	// checks of its calls.
	Methods map[string][]Check
	// Default holds the checks of a call to any other method; none means
	// such calls are not limited.
	Default []Check
	// Timeout bounds the wait for the cluster's decision; past it the
	// Guard's failure policy answers. Default 2s.
	Timeout time.Duration
	// SettleTTL, when not 0 (1s to 1h), charges every admission
	// its checks' cost up front, for the handler to settle with what
	// the call used (Settle) within that time, as middleware's does; every
	// list of checks must then cost the same on each of its checks.
	SettleTTL time.Duration
	// Logger receives what the interceptor cannot answer for (checks the
	// cluster refuses as invalid: a mistake in Options). Default
	// slog.Default().
	Logger *slog.Logger
}

// Limiter makes the interceptors.
type Limiter struct {
	decider limitcheck.Decider
	opts    Options
	methods *limitcheck.Table[Call]
}

// New returns a Limiter that asks guard. It refuses Options with a check
// that has no key, both or neither of Limit and Policy, a negative cost, or
// a name used twice in one list.
func New(guard *client.Guard, opts Options) (*Limiter, error) {
	if guard == nil {
		return nil, errors.New("grpclimit: a client.Guard is required")
	}
	methods, err := limitcheck.NewTable("Methods", opts.Default, opts.Methods, func(c Check) limitcheck.Check[Call] {
		return limitcheck.Check[Call]{Name: c.Name, Key: c.Key, Limit: c.Limit, Policy: c.Policy, Cost: c.Cost}
	})
	if err != nil {
		return nil, fmt.Errorf("grpclimit: %w", err)
	}
	if opts.SettleTTL != 0 {
		if err := methods.OneCostEach("Methods"); err != nil {
			return nil, fmt.Errorf("grpclimit: %w", err)
		}
	}
	l := &Limiter{methods: methods}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l.opts, l.decider = opts, limitcheck.Decider{Guard: guard, Timeout: opts.Timeout}
	return l, nil
}

// Unary returns the unary server interceptor: a call is decided before its
// handler runs.
func (l *Limiter) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := l.admit(ctx, info.FullMethod, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) },
			func(md metadata.MD) error { return grpc.SetTrailer(ctx, md) })
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor: a stream is decided once,
// when it opens; its messages are not counted.
func (l *Limiter) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := l.admit(ss.Context(), info.FullMethod, ss.SetHeader, func(md metadata.MD) error { ss.SetTrailer(md); return nil })
		if err != nil {
			return err
		}
		return handler(srv, &admittedStream{ServerStream: ss, ctx: ctx})
	}
}

// admittedStream is a stream whose context carries what Charge needs.
type admittedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *admittedStream) Context() context.Context { return s.ctx }

// admit decides the call and returns the context to serve it with, or the
// status error to end it with. setHeader sends the rate-limit metadata of
// an admission; a denial's goes in the trailer (with the status), where
// gRPC's retry policy reads grpc-retry-pushback-ms.
func (l *Limiter) admit(ctx context.Context, method string, setHeader, setTrailer func(metadata.MD) error) (context.Context, error) {
	checks := l.methods.Lookup(method)
	if checks.Empty() {
		return ctx, nil
	}
	req, err := checks.Request(Call{Ctx: ctx, Method: method})
	if errors.Is(err, ErrNoKey) {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	req.SettleTTL = l.opts.SettleTTL
	d, err := l.decider.Decide(ctx, req)
	if err != nil {
		l.opts.Logger.Error("the cluster refused the interceptor's checks as invalid: fix the Limiter's Options", "method", method, "err", err)
		return nil, status.Error(codes.Internal, "the rate limit of this method is misconfigured")
	}
	md := metadata.MD{}
	for _, h := range limitcheck.Headers(d, !d.Allowed) {
		md.Append(strings.ToLower(h.Name), h.Value)
	}
	if !d.Allowed {
		// gRPC's retry policy reads the pushback; people read the message.
		md.Set("grpc-retry-pushback-ms", strconv.FormatInt(max(d.ExactRetryAfter.Milliseconds(), 1), 10))
		_ = setTrailer(md)
		return nil, status.Errorf(codes.ResourceExhausted, "rate limit exceeded: retry after %d ms", d.ExactRetryAfter.Milliseconds())
	}
	_ = setHeader(md)
	return context.WithValue(ctx, admittedKey{}, &limitcheck.Admitted[Call]{Decider: l.decider, Checks: checks, Request: req, Decision: d}), nil
}

type admittedKey struct{}

// ErrNotAdmitted is Charge's error for a context that did not come from a
// call the interceptor let through.
var ErrNotAdmitted = errors.New("grpclimit: the context is not that of a call the interceptor admitted")

// Charge counts extra more against the check named name of the call whose
// context ctx is, once the handler knows the real cost; the semantics of
// middleware.Charge: one more decision, all or nothing (to pay only for what
// a call used, charge up front and Settle instead).
func Charge(ctx context.Context, name string, extra int64) (client.GuardDecision, error) {
	a, ok := ctx.Value(admittedKey{}).(*limitcheck.Admitted[Call])
	if !ok {
		return client.GuardDecision{}, ErrNotAdmitted
	}
	d, err := a.Charge(ctx, name, extra)
	if err != nil {
		return d, fmt.Errorf("grpclimit: %w", err)
	}
	return d, err
}

// Settle settles the open settlement of the call whose context ctx is (see
// Options.SettleTTL) with used, what the call cost, as middleware.Settle
// does: once per call; nothing to settle (the zero Settlement) for a call
// admitted without a settlement.
func Settle(ctx context.Context, used int64) (client.Settlement, error) {
	a, ok := ctx.Value(admittedKey{}).(*limitcheck.Admitted[Call])
	if !ok {
		return client.Settlement{}, ErrNotAdmitted
	}
	s, err := a.Settle(ctx, used)
	if err != nil {
		return s, fmt.Errorf("grpclimit: %w", err)
	}
	return s, nil
}
