package httpapi

import (
	"errors"
	"net/http"

	"github.com/limitnode/limitnode/auth"
)

// Codes of the error body for a call without the credentials it needs.
const (
	codeUnauthenticated  = "unauthenticated"
	codePermissionDenied = "permission_denied"
)

// authorize lets a call through when it needs no role, tokens are off, or
// its bearer token has the role; otherwise it answers 401 (no or unknown
// token, with WWW-Authenticate) or 403 (a known token without the role) and
// returns false. The token never reaches a log or an answer.
func (a *API) authorize(w http.ResponseWriter, r *http.Request, role auth.Role) bool {
	if role == open || a.opts.Authorizer == nil {
		return true
	}
	_, err := a.opts.Authorizer.Authorize(auth.BearerToken(r.Header.Get("Authorization")), role)
	switch {
	case err == nil:
		return true
	case errors.Is(err, auth.ErrPermissionDenied):
		writeError(w, &apiError{status: http.StatusForbidden, code: codePermissionDenied,
			message: "this token lacks the " + string(role) + " role that " + r.Method + " " + r.URL.Path + " needs"})
	default:
		w.Header().Set("WWW-Authenticate", `Bearer realm="limitnode"`)
		writeError(w, &apiError{status: http.StatusUnauthorized, code: codeUnauthenticated,
			message: "a valid bearer token is required: Authorization: Bearer <token>"})
	}
	return false
}
