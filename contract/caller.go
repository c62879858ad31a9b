package contract

import "context"

// Caller is who makes a call, as the API's credentials say: the name of the
// API token it came with, and whether that token has the admin role. A call
// without a Caller in its context (an embedding program's, or any call when
// the API checks no tokens) is nobody's in particular: it may act on every
// caller's leases, its max_wait is bounded as any caller's, and the leases
// it takes count toward the cluster's bound only, not a caller's.
type Caller struct {
	Name  string
	Admin bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c, for the calls made under it.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the Caller ctx carries, and whether it carries one.
func CallerOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}
