package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/msgpack"
	"github.com/limitnode/limitnode/internal/transport"
	"github.com/prometheus/client_golang/prometheus"
)

// Back-off between attempts to reach the leader: short at first (a new
// leader is usually known within milliseconds of an election), capped so
// that a caller notices a leader soon after it appears.
const (
	firstLeaderBackoff = 2 * time.Millisecond
	maxLeaderBackoff   = 100 * time.Millisecond
)

// leaderRoute is how this node gets work done on the leader: by itself
// when it leads, else by forwarding to the leader Raft names, trying again
// while the leader changes (onLeader).
type leaderRoute struct {
	self    string // this node's ID
	replica *replica
	fwd     *forwarder
	// refuse refuses every operation while this node is outside its
	// cluster (members.refuseOutside).
	refuse func() error
	// holdCommand holds a command while this node, its cluster's only
	// voter, has just started (members.awaitDialers).
	holdCommand func(ctx context.Context) error
	// applied is told of each command this leader appended for a member
	// (applyRequested), with its result.
	applied func(t fsm.CommandType, result any)
	// readWait observes how long each catchUp took.
	readWait prometheus.Observer
	logger   *slog.Logger
}

// withDeadline gives ctx the route's timeout unless it has a deadline.
func (rt *leaderRoute) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, rt.replica.timeout)
}

// onLeader runs attempt, which does its work on the leader (here, or by
// forwarding), until it gets an answer. It tries again, backing off, while
// attempt returns errNotLeader (it did nothing, so sending again is safe)
// and, for an idempotent operation, while the outcome is unknown. When ctx
// ends first it returns contract.ErrNoLeader.
func onLeader[T any](ctx context.Context, rt *leaderRoute, idempotent bool, attempt func(ctx context.Context) (T, error)) (T, error) {
	if err := rt.refuse(); err != nil {
		var zero T
		return zero, err
	}
	ctx, cancel := rt.withDeadline(ctx)
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
		case <-rt.replica.stop:
			timer.Stop()
			var zero T
			return zero, contract.ErrShutdown
		case <-timer.C:
		}
		backoff = min(2*backoff, maxLeaderBackoff)
	}
}

// op runs an idempotent operation that answers only with an error on the
// leader: local() if this node leads, else the forward message.
func (rt *leaderRoute) op(ctx context.Context, forward *forwardRequest, local func() error) error {
	_, err := onLeader(ctx, rt, true, func(ctx context.Context) (struct{}, error) {
		if rt.replica.isLeader() {
			return struct{}{}, local()
		}
		_, err := rt.forward(ctx, forward)
		return struct{}{}, err
	})
	return err
}

// forward sends one message to the leader this node knows and returns its
// reply; the reply's status becomes this package's error.
func (rt *leaderRoute) forward(ctx context.Context, req *forwardRequest) (*forwardResponse, error) {
	addr, id := rt.replica.raft.LeaderWithID()
	if addr == "" || string(id) == rt.self {
		return nil, errNotLeader
	}
	resp, err := rt.fwd.send(ctx, string(addr), req)
	switch {
	case errors.Is(err, transport.ErrNotSent):
		return nil, errNotLeader
	case err != nil:
		return nil, fmt.Errorf("%w: %w", contract.ErrOutcomeUnknown, err)
	}
	return resp, errorFor(resp)
}

// commandOnLeader appends a replicated command on the leader, here or
// through the forwarding protocol (opCommand), and returns what it answered
// with: R is the apply response's type (struct{} for a command that answers
// only with an error, fsm.LeaseResult for the lease commands). The leader
// reads, checks and stamps it with fsm.DecodeRequest's rule whichever node
// was asked. Every such command is idempotent (a put puts the same again, a
// lease command carries its ID), so an unknown outcome is tried again. An
// operator's command (fsm.Audited) goes inside fsm.CommandAudited, naming
// who asked (contract.ActorOf ctx), so that its entry records it in the
// audit trail. On a node that is its cluster's only voter and has just
// started, the command waits first (holdCommand).
func commandOnLeader[R any](ctx context.Context, rt *leaderRoute, t fsm.CommandType, body any) (*R, error) {
	encode := fsm.Encode
	if fsm.Audited(t) {
		encode = func(t fsm.CommandType, body any) ([]byte, error) {
			return fsm.EncodeAudited(contract.ActorOf(ctx), t, body)
		}
	}
	data, err := encode(t, body)
	if err != nil {
		return nil, err
	}
	if err := rt.holdCommand(ctx); err != nil {
		return nil, err
	}
	return onLeader(ctx, rt, true, func(ctx context.Context) (*R, error) {
		if rt.replica.isLeader() {
			result, err := rt.applyRequested(data)
			if err != nil {
				return nil, err
			}
			return resultAs[R](result)
		}
		reply, err := rt.forward(ctx, &forwardRequest{Op: opCommand, Command: data})
		if err != nil {
			return nil, err
		}
		out := new(R)
		if len(reply.Result) > 0 {
			if err := codec.NewDecoderBytes(reply.Result, msgpack.Handle).Decode(out); err != nil {
				return nil, fmt.Errorf("cluster: the leader's answer to command %d: %w", t, err)
			}
		}
		return out, nil
	})
}

// applyRequested is the leader's side of commandOnLeader: it reads and
// checks the command, stamps the leader's time on one that carries it, and
// appends it.
func (rt *leaderRoute) applyRequested(data []byte) (any, error) {
	req, err := fsm.DecodeRequest(data)
	if err != nil {
		return nil, err
	}
	if req.Stamped() {
		stamp, err := rt.replica.leaderStamp()
		if err != nil {
			return nil, err
		}
		req.Stamp(stamp)
	}
	if data, err = req.Encode(); err != nil {
		return nil, err
	}
	result, err := rt.replica.appendEntry(data)
	if err == nil {
		rt.applied(req.Type, result)
	}
	return result, err
}

// resultAs is an apply response as the type a command answers with.
func resultAs[R any](result any) (*R, error) {
	if result == nil {
		return new(R), nil
	}
	r, ok := result.(*R)
	if !ok {
		return nil, fmt.Errorf("cluster: a command answered with %T, want %T", result, new(R))
	}
	return r, nil
}

// encodeResult encodes an apply response for the forwarding protocol.
func encodeResult(result any) ([]byte, error) {
	var out []byte
	if err := codec.NewEncoderBytes(&out, msgpack.Handle).Encode(result); err != nil {
		return nil, fmt.Errorf("cluster: encode a command's answer: %w", err)
	}
	return out, nil
}
