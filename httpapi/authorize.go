package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/contract"
)

// Codes of the error body for a call without the credentials it needs.
const (
	codeUnauthenticated  = "unauthenticated"
	codePermissionDenied = "permission_denied"
)

// callerKey is the context key of the name of the token a request came
// with.
type callerKey struct{}

// callerOf returns the name of the token r came with, or "" when tokens are
// off.
func callerOf(r *http.Request) string {
	name, _ := r.Context().Value(callerKey{}).(string)
	return name
}

// authorize lets a call through when it needs no role, tokens are off, or
// its bearer token has the role, returning the request with the token's
// name in its context (callerOf); otherwise it answers 401 (no or unknown
// token, with WWW-Authenticate) or 403 (a known token without the role) and
// returns nil. The token never reaches a log or an answer.
func (a *API) authorize(w http.ResponseWriter, r *http.Request, role auth.Role) *http.Request {
	if role == open || a.opts.Authorizer == nil {
		return r
	}
	name, err := a.opts.Authorizer.Authorize(auth.BearerToken(r.Header.Get("Authorization")), role)
	switch {
	case err == nil:
		// The name goes with the call: as the scope of its request IDs
		// (callerOf) and as who made a change (the audit trail's actor).
		return r.WithContext(contract.WithActor(context.WithValue(r.Context(), callerKey{}, name), name))
	case errors.Is(err, auth.ErrPermissionDenied):
		writeError(w, &apiError{status: http.StatusForbidden, code: codePermissionDenied,
			message: "this token lacks the " + string(role) + " role that " + r.Method + " " + r.URL.Path + " needs"})
	default:
		writeUnauthenticated(w, r, err)
	}
	return nil
}

// writeUnauthenticated answers 401 for a call that authorize refused with
// err, an auth.ErrUnauthenticated, saying which of three it is: no
// Authorization header, one that holds no bearer token, or a token that
// matches none of the cluster's (RFC 6750's invalid_token). Nothing of what
// the call carried is repeated.
func writeUnauthenticated(w http.ResponseWriter, r *http.Request, err error) {
	challenge, message := `Bearer realm="limitnode"`, "this call needs a bearer token: Authorization: Bearer <token>"
	switch {
	case errors.Is(err, auth.ErrUnknownToken):
		challenge += `, error="invalid_token"`
		message = "the bearer token given matches none of this cluster's tokens: check it (the -auth file lists the SHA-256 of each)"
	case r.Header.Get("Authorization") != "":
		message = "the Authorization header holds no bearer token: write it Authorization: Bearer <token>"
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeError(w, &apiError{status: http.StatusUnauthorized, code: codeUnauthenticated, message: message})
}
