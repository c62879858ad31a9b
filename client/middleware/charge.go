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
// page). What was charged up front is not given back: a handler that may
// cost less than the most it may cost is charged the most up front instead
// (Options.SettleTTL) and settles with what it used (Settle).
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

// Settle settles the open settlement of the request whose context ctx is (see
// Options.SettleTTL) with used, what the request cost: what it did not use
// of its checks' cost is given back, what it used beyond is charged (up to
// the policies' max_debt beyond empty). Once per request: again is
// limitcheck's ErrSettledAlready. A request admitted without a settlement
// (no SettleTTL, or the Guard's failure policy answered) has nothing to
// settle: the zero Settlement.
func Settle(ctx context.Context, used int64) (client.Settlement, error) {
	a, ok := ctx.Value(admittedKey{}).(*limitcheck.Admitted[*http.Request])
	if !ok {
		return client.Settlement{}, ErrNotAdmitted
	}
	s, err := a.Settle(ctx, used)
	if err != nil {
		return s, fmt.Errorf("middleware: %w", err)
	}
	return s, nil
}
