package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
)

// The codes of the error body that are not contract.Codes: HTTP's own, and
// what the cluster's state makes of a request.
const (
	codePayloadTooLarge  = "payload_too_large"
	codeMethodNotAllowed = "method_not_allowed"
	// codeNotImplemented is a 501: the backend does not do the route's
	// job (see needs).
	codeNotImplemented = "not_implemented"
	codeUnavailable    = "unavailable"
	// codeOutcomeUnknown is a 503 after which the request may or may not
	// have been decided: retry with the same request_id, not afresh.
	codeOutcomeUnknown = "outcome_unknown"
	codeInternal       = "internal"
)

// apiError is an error answer: a status, the body's code, field and message,
// and a Retry-After header when there is one to send.
type apiError struct {
	status     int
	code       string
	field      string
	message    string
	retryAfter string
}

func (e *apiError) Error() string { return e.message }

func (e *apiError) body() wire.Error {
	return wire.Error{Message: e.message, Code: e.code, Field: e.field}
}

// invalid is a 400 naming the field at fault.
func invalid(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: string(contract.CodeInvalidArgument), field: field, message: fmt.Sprintf(format, args...)}
}

// notFound is a 404 naming the field at fault.
func notFound(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, code: string(contract.CodeNotFound), field: field, message: fmt.Sprintf(format, args...)}
}

// unavailable is a 503 that asks the caller to retry in a second.
func unavailable(message string) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, message: message, retryAfter: "1"}
}

// fromContract is the answer to a request the contract refuses: the one
// place where a contract.Code becomes a status.
func fromContract(e *contract.Error) *apiError {
	switch e.Code {
	case contract.CodeNotFound:
		return notFound(e.Field, "%s", e.Message)
	case contract.CodeResourceExhausted:
		out := unavailable(e.Message)
		out.field = e.Field
		return out
	case contract.CodeConflict:
		return &apiError{status: http.StatusConflict, code: string(contract.CodeConflict), field: e.Field, message: e.Message}
	case contract.CodePermissionDenied:
		return &apiError{status: http.StatusForbidden, code: codePermissionDenied, field: e.Field, message: e.Message}
	default:
		return invalid(e.Field, "%s", e.Message)
	}
}

// clusterError maps what a Limiter returns to an answer: the one place
// where the cluster's errors become statuses.
func (a *API) clusterError(r *http.Request, err error) *apiError {
	if rej := contract.As(err); rej != nil {
		return fromContract(rej)
	}
	switch {
	case errors.Is(err, contract.ErrNotMember):
		return unavailable(err.Error() + "; ask another node")
	case errors.Is(err, contract.ErrOutcomeUnknown):
		out := unavailable("the outcome is unknown (the leader changed or did not answer in time); retry with the same request_id to be answered once")
		out.code = codeOutcomeUnknown
		return out
	case errors.Is(err, contract.ErrNoLeader), errors.Is(err, contract.ErrShutdown),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return unavailable("no leader could be reached in time; retry")
	default:
		a.opts.Logger.Error("request failed", "path", r.URL.Path, "err", err)
		return &apiError{status: http.StatusInternalServerError, code: codeInternal, message: err.Error()}
	}
}

// writeClusterError answers with clusterError's mapping of err.
func (a *API) writeClusterError(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, a.clusterError(r, err))
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter != "" {
		w.Header().Set("Retry-After", e.retryAfter)
	}
	writeJSON(w, e.status, e.body())
}
