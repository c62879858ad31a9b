package grpclimit

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/limitnode/limitnode/client/internal/limitcheck"
	"github.com/limitnode/limitnode/internal/clientip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Call is what a key is built from: the call's context (its incoming
// metadata, its peer, what an authentication interceptor put there) and
// its full method name ("/package.Service/Method").
type Call struct {
	Ctx    context.Context
	Method string
}

// KeyFunc returns what a call contributes to a limit's key. An error stops
// the call before the cluster is asked: ErrNoKey (the call lacks the part)
// as Unauthenticated, another as InvalidArgument.
type KeyFunc func(Call) (string, error)

// ErrNoKey is a KeyFunc's error for a call that lacks the part of the key
// it reads.
var ErrNoKey = limitcheck.ErrNoKey

// Const is the same part for every call: a shared bucket's name, or a
// prefix that keeps one check's keys apart from another's.
func Const(part string) KeyFunc {
	return func(Call) (string, error) { return part, nil }
}

// Metadata is the first value of the incoming metadata key name (an API
// key, say); none is ErrNoKey.
func Metadata(name string) KeyFunc {
	return func(c Call) (string, error) {
		if v := metadata.ValueFromIncomingContext(c.Ctx, name); len(v) > 0 && v[0] != "" {
			return v[0], nil
		}
		return "", fmt.Errorf("metadata %s: %w", name, ErrNoKey)
	}
}

// FromContext is what get finds in the call's context: the authenticated
// user an authentication interceptor, run before this one, put there. Not
// found is ErrNoKey.
func FromContext(get func(context.Context) (string, bool)) KeyFunc {
	return func(c Call) (string, error) {
		if v, ok := get(c.Ctx); ok && v != "" {
			return v, nil
		}
		return "", fmt.Errorf("no authenticated user in the call's context: %w", ErrNoKey)
	}
}

// PeerIP is the client's address: the connecting peer's, unless the peer
// is within trusted (the proxies in front of the server), in which case the
// x-forwarded-for metadata is believed from the right up to the first
// address that is not trusted; the rule of middleware.ClientIP.
func PeerIP(trusted ...netip.Prefix) KeyFunc {
	return func(c Call) (string, error) {
		p, ok := peer.FromContext(c.Ctx)
		if !ok || p.Addr == nil {
			return "", fmt.Errorf("the call has no peer address: %w", ErrNoKey)
		}
		a, err := clientip.Resolve(p.Addr.String(), metadata.ValueFromIncomingContext(c.Ctx, "x-forwarded-for"), trusted)
		if err != nil {
			return "", err
		}
		return a.String(), nil
	}
}

// Method is the call's full method name, "/package.Service/Method".
func Method() KeyFunc {
	return func(c Call) (string, error) { return c.Method, nil }
}

// Join makes a key of several parts, in order, separated by "|" (a "|" or
// "\" within a part is escaped, so different parts never make one key).
func Join(parts ...KeyFunc) KeyFunc {
	funcs := make([]func(Call) (string, error), len(parts))
	for i, p := range parts {
		funcs[i] = p
	}
	return limitcheck.Join(funcs...)
}
