package contract

import (
	"errors"
	"fmt"
)

// Code says, for a machine, why a request was refused. The values are the
// "code" of the HTTP API's error body where the two coincide.
type Code string

// The codes of *Error.
const (
	// CodeInvalidArgument: a value is missing, malformed or out of range.
	CodeInvalidArgument Code = "invalid_argument"
	// CodeNotFound: the request names a policy, lease or member that does
	// not exist.
	CodeNotFound Code = "not_found"
	// CodeResourceExhausted: the request needs state beyond a cap the
	// cluster keeps (live keys, leases). Nothing was consumed; it may
	// succeed once state expires.
	CodeResourceExhausted Code = "resource_exhausted"
	// CodeConflict: the request contradicts the state it would change: it
	// reuses a request ID that a different request was decided under, or
	// asks a node that already belongs to a cluster to form one. Nothing
	// was decided or changed.
	CodeConflict Code = "conflict"
	// CodePermissionDenied: the caller may not act on what the request
	// names (a lease another caller holds). Nothing was changed.
	CodePermissionDenied Code = "permission_denied"
)

// Sentinels that an *Error matches with errors.Is, one per Code.
var (
	ErrInvalid           = errors.New("invalid request")
	ErrNotFound          = errors.New("not found")
	ErrResourceExhausted = errors.New("resource exhausted")
	ErrConflict          = errors.New("conflict")
	ErrPermissionDenied  = errors.New("permission denied")
)

// Error is a request refused as it stands: nothing was decided or changed.
type Error struct {
	Code Code
	// Field is the JSON path of the value at fault ("limit.rate",
	// "checks[1].policy"), or "" when no one field is.
	Field   string
	Message string
}

// Error returns the message, prefixed by the field when there is one.
func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Unwrap returns the sentinel of the error's code, so that
// errors.Is(err, ErrInvalid) and the like work.
func (e *Error) Unwrap() error {
	switch e.Code {
	case CodeNotFound:
		return ErrNotFound
	case CodeResourceExhausted:
		return ErrResourceExhausted
	case CodeConflict:
		return ErrConflict
	case CodePermissionDenied:
		return ErrPermissionDenied
	default:
		return ErrInvalid
	}
}

// Within returns a copy of e whose field is under prefix: "limit.rate"
// within "checks[2]" is "checks[2].limit.rate".
func (e *Error) Within(prefix string) *Error {
	out := *e
	switch {
	case prefix == "":
	case out.Field == "":
		out.Field = prefix
	default:
		out.Field = prefix + "." + out.Field
	}
	return &out
}

// Invalid returns an *Error with CodeInvalidArgument.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns an *Error with CodeNotFound.
func NotFound(field, format string, args ...any) *Error {
	return &Error{Code: CodeNotFound, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Conflict returns an *Error with CodeConflict.
func Conflict(field, format string, args ...any) *Error {
	return &Error{Code: CodeConflict, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Denied returns an *Error with CodePermissionDenied.
func Denied(field, format string, args ...any) *Error {
	return &Error{Code: CodePermissionDenied, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Exhausted returns an *Error with CodeResourceExhausted.
func Exhausted(format string, args ...any) *Error {
	return &Error{Code: CodeResourceExhausted, Message: fmt.Sprintf(format, args...)}
}

// As returns err as an *Error, or nil when it is not one.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// Errors of a cluster that cannot decide right now, whatever the request.
// Nothing is wrong with the request; the caller may retry.
var (
	// ErrNoLeader: no leader could be reached before the request's
	// deadline. Nothing was decided; the caller may retry.
	ErrNoLeader = errors.New("no leader reachable")
	// ErrOutcomeUnknown: the request reached the log but its outcome could
	// not be learnt (leadership was lost, the deadline passed or the leader
	// went away mid-request). It may or may not have consumed; a retry with
	// the same request ID is answered with the first decision.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrShutdown: the node is shutting down.
	ErrShutdown = errors.New("node is shut down")
	// ErrNotMember: the node asked is not part of the cluster it should
	// belong to (it runs alone while another cluster's nodes count its
	// address as theirs), so it decides nothing. It is an ErrNoLeader:
	// the caller asks another node.
	ErrNotMember = fmt.Errorf("%w: this node is outside its cluster", ErrNoLeader)
)
