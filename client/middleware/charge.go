package middleware

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/client/internal/limitcheck"
)

type admittedKey struct{}

// ErrNotAdmitted is Charge's error for a context that did not come from a
// request the middleware let through.
var ErrNotAdmitted = errors.New("middleware: the context is not that of a request the middleware admitted")

// Charge counts extra more against the check named name of the request
// whose context ctx is, for a cost known only once the handler has done
// its work (rows returned, bytes sent). It is a decision like any other,
// with the same key and limit, asked through the same Guard: all or
// nothing. If the bucket lacks extra, nothing is consumed and the decision
// is a denial saying when to retry; the handler has already served, so
// what follows is its choice (cut the response short, refuse the next
// page). Tokens cannot be given back: the cluster has no refund, so a
// handler that may cost less than it charged up front should charge the
// least up front and the rest with Charge.
func Charge(ctx context.Context, name string, extra int64) (client.GuardDecision, error) {
	a, ok := ctx.Value(admittedKey{}).(*limitcheck.Admitted[*http.Request])
	if !ok {
		return client.GuardDecision{}, ErrNotAdmitted
	}
	d, err := a.Charge(ctx, name, extra)
	if err != nil {
		return d, fmt.Errorf("middleware: %w", err)
	}
	return d, err
}
