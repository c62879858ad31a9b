package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/transport"
)

// Back-off between attempts to reach the leader: short at first (a new
// leader is usually known within milliseconds of an election), capped so
// that a caller notices a leader soon after it appears.
const (
	firstLeaderBackoff = 2 * time.Millisecond
	maxLeaderBackoff   = 100 * time.Millisecond
)

// withDeadline gives ctx the node's request timeout unless it has a deadline.
func (n *Node) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, n.requestTimeout)
}

// onLeader runs attempt, which does its work on the leader (here, or by
// forwarding), until it gets an answer. It tries again, backing off, while
// attempt returns errNotLeader (it did nothing, so sending again is safe)
// and, for an idempotent operation, while the outcome is unknown. When ctx
// ends first it returns contract.ErrNoLeader.
func onLeader[T any](ctx context.Context, n *Node, idempotent bool, attempt func(ctx context.Context) (T, error)) (T, error) {
	if err := n.members.refuseOutside(); err != nil {
		var zero T
		return zero, err
	}
	ctx, cancel := n.withDeadline(ctx)
	defer cancel()
	backoff := firstLeaderBackoff
	for {
		result, err := attempt(ctx)
		retry := errors.Is(err, errNotLeader) || (idempotent && errors.Is(err, contract.ErrOutcomeUnknown))
		if !retry {
			return result, err
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			var zero T
			return zero, fmt.Errorf("%w: %w", contract.ErrNoLeader, err)
		case <-n.stopCh:
			timer.Stop()
			var zero T
			return zero, contract.ErrShutdown
		case <-timer.C:
		}
		backoff = min(2*backoff, maxLeaderBackoff)
	}
}

// leaderOp runs an idempotent operation that answers only with an error on
// the leader: local() if this node leads, else the forward message.
func (n *Node) leaderOp(ctx context.Context, forward *forwardRequest, local func() error) error {
	_, err := onLeader(ctx, n, true, func(ctx context.Context) (struct{}, error) {
		if n.isLeader() {
			return struct{}{}, local()
		}
		_, err := n.forwardToLeader(ctx, forward)
		return struct{}{}, err
	})
	return err
}

// forwardToLeader sends one message to the leader this node knows and
// returns its reply; the reply's status becomes this package's error.
func (n *Node) forwardToLeader(ctx context.Context, req *forwardRequest) (*forwardResponse, error) {
	addr, id := n.raft.LeaderWithID()
	if addr == "" || string(id) == n.cfg.ID {
		return nil, errNotLeader
	}
	resp, err := n.fwd.send(ctx, string(addr), req)
	switch {
	case errors.Is(err, transport.ErrNotSent):
		return nil, errNotLeader
	case err != nil:
		return nil, fmt.Errorf("%w: %w", contract.ErrOutcomeUnknown, err)
	}
	return resp, errorFor(resp)
}
