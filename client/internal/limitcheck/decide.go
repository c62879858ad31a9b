package limitcheck

import (
	"context"
	"fmt"
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
// through: enough to charge more against its checks afterwards.
type Admitted[R any] struct {
	Decider Decider
	Checks  *List[R]
	Request client.AllowRequest
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
