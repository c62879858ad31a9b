package middleware

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/limitnode/limitnode/client/internal/limitcheck"
	"github.com/limitnode/limitnode/internal/clientip"
)

// KeyFunc returns what a request contributes to a limit's key: an API key,
// a user, a client address, a route. An error stops the request before the
// cluster is asked (see Options.OnKeyError); ErrNoKey says the request
// lacks the part (no API key, no authenticated user).
type KeyFunc func(r *http.Request) (string, error)

// ErrNoKey is a KeyFunc's error for a request that lacks the part of the
// key it reads. By default such a request is answered 401.
var ErrNoKey = limitcheck.ErrNoKey

// Const is the same part for every request: the name of a shared (global)
// bucket, or a prefix that keeps one check's keys apart from another's.
func Const(part string) KeyFunc {
	return func(*http.Request) (string, error) { return part, nil }
}

// Header is the value of the request's header name, an API key for
// example; a missing or empty header is ErrNoKey.
func Header(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if v := r.Header.Get(name); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("header %s: %w", name, ErrNoKey)
	}
}

// FromContext is what get finds in the request's context: the
// authenticated user that the caller's own authentication middleware, run
// before this one, put there (see the JWT example in examples/middleware).
// Not found is ErrNoKey.
func FromContext(get func(context.Context) (string, bool)) KeyFunc {
	return func(r *http.Request) (string, error) {
		if v, ok := get(r.Context()); ok && v != "" {
			return v, nil
		}
		return "", fmt.Errorf("no authenticated user in the request's context: %w", ErrNoKey)
	}
}

// ClientIP is the client's address: the connecting peer's, unless the
// peer is within trusted (the proxies in front of the service), in which
// case X-Forwarded-For is believed from the right up to the first address
// that is not trusted. With no trusted prefixes the header is never read,
// so a client cannot choose its own key by sending it.
func ClientIP(trusted ...netip.Prefix) KeyFunc {
	return func(r *http.Request) (string, error) {
		a, err := clientip.Resolve(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), trusted)
		if err != nil {
			return "", err
		}
		return a.String(), nil
	}
}

// Route is the ServeMux pattern the request matched ("POST /export",
// "GET /users/{id}"), not its path, so that every /users/{id} is one
// route. Requests that match no pattern share the part "".
func Route() KeyFunc {
	return func(r *http.Request) (string, error) { return r.Pattern, nil }
}

// Join makes a key of several parts, in order, separated by "|" (a "|" or
// "\" within a part is escaped, so different parts never make one key).
func Join(parts ...KeyFunc) KeyFunc {
	funcs := make([]func(*http.Request) (string, error), len(parts))
	for i, p := range parts {
		funcs[i] = p
	}
	return limitcheck.Join(funcs...)
}
