package limitcheck

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/limitnode/limitnode/client"
)

// Decider asks a Guard, waiting at most Timeout for the cluster.
type Decider struct {
	Guard   *client.Guard
	Timeout time.Duration
}

// Decide asks for req's decision.
func (d Decider) Decide(ctx context.Context, req client.AllowRequest) (client.GuardDecision, error) {
	ctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	return d.Guard.Allow(ctx, req)
}

// Admitted is what a middleware leaves in the context of a call it let
// through: enough to charge more against its checks afterwards, or to
// settle its open settlement.
type Admitted[R any] struct {
	Decider Decider
	Checks  *List[R]
	Request client.AllowRequest
	// Decision is the call's admission; with Request.SettleTTL, it names
	// the open settlement to settle.
	Decision client.GuardDecision
	settled  atomic.Bool
}

// ErrSettledAlready is Settle's error for a call settled before.
var ErrSettledAlready = errors.New("the call's settlement was settled already")

// Settle settles the admitted call's open settlement with used, what the call
// cost, once (the Guard's settlement retries while the cluster answers
// 503, within the Decider's Timeout, even after ctx is cancelled: the work
// was done). A call that holds no open settlement (no SettleTTL, or admitted
// by the Guard's failure policy) has nothing to settle: the zero
// Settlement.
func (a *Admitted[R]) Settle(ctx context.Context, used int64) (client.Settlement, error) {
	if a.Decision.SettlementID == "" {
		return client.Settlement{}, nil
	}
	if !a.settled.CompareAndSwap(false, true) {
		return client.Settlement{}, ErrSettledAlready
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.Decider.Timeout)
	defer cancel()
	return a.Decider.Guard.Settle(ctx, a.Decision, used)
}

// Charge counts extra more against the check named name of the admitted
// call: one more decision, with the same key and limit, all or nothing.
func (a *Admitted[R]) Charge(ctx context.Context, name string, extra int64) (client.GuardDecision, error) {
	if extra <= 0 {
		return client.GuardDecision{}, fmt.Errorf("Charge of %d: extra must be positive", extra)
	}
	if name == "" {
		return client.GuardDecision{}, fmt.Errorf("Charge: name the check to charge")
	}
	req, ok := a.Checks.Extra(a.Request, name, extra)
	if !ok {
		return client.GuardDecision{}, fmt.Errorf("no check named %q on this call", name)
	}
	return a.Decider.Decide(ctx, req)
}
