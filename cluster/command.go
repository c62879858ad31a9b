package cluster

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/msgpack"
)

// commandOnLeader appends a replicated command on the leader, here or
// through the forwarding protocol (opCommand), and returns what it answered
// with: R is the apply response's type (struct{} for a command that answers
// only with an error, fsm.LeaseResult for the lease commands). The leader
// reads, checks and stamps it with fsm.DecodeRequest's rule whichever node
// was asked. Every such command is idempotent (a put puts the same again, a
// lease command carries its ID), so an unknown outcome is tried again. An
// operator's command (fsm.Audited) goes inside fsm.CommandAudited, naming
// who asked (contract.ActorOf ctx), so that its entry records it in the
// audit trail.
func commandOnLeader[R any](ctx context.Context, n *Node, t fsm.CommandType, body any) (*R, error) {
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
	return onLeader(ctx, n, true, func(ctx context.Context) (*R, error) {
		if n.IsLeader() {
			result, err := n.applyRequested(data)
			if err != nil {
				return nil, err
			}
			return resultAs[R](result)
		}
		reply, err := n.forwardToLeader(ctx, &forwardRequest{Op: opCommand, Command: data})
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
func (n *Node) applyRequested(data []byte) (any, error) {
	req, err := fsm.DecodeRequest(data)
	if err != nil {
		return nil, err
	}
	if req.Stamped() {
		stamp, err := n.replica.leaderStamp()
		if err != nil {
			return nil, err
		}
		req.Stamp(stamp)
	}
	if data, err = req.Encode(); err != nil {
		return nil, err
	}
	result, err := n.replica.appendEntry(data)
	if err == nil && fsm.EffectOf(req.Type, result).Waits() {
		n.waitOutLeases()
	}
	if lease, ok := result.(*fsm.LeaseResult); ok && (lease.Queued || lease.Waiting > 0) {
		// A queue may now be due sooner: a waiter joined, or a renewal
		// brought forward an expiry a waiter waits for.
		n.kickLeaseQueues()
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
