package cluster

import (
	"context"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// ForwardAllowTo sends req to addr over the forwarding protocol, as this
// node would send it to a leader, and returns the error of the exchange.
func (n *Node) ForwardAllowTo(ctx context.Context, addr string, req contract.Request) error {
	fr, err := requestOf(req)
	if err != nil {
		return err
	}
	resp, err := n.fwd.send(ctx, addr, &forwardRequest{Op: opAllow, Requests: []fsm.Request{fr}})
	if err != nil {
		return err
	}
	return errorFor(resp)
}

// ForwardRawTo sends requests to addr in one opAllow message, unchecked,
// as a node of another build (or a hand-built message) might, and returns
// the answer's results.
func (n *Node) ForwardRawTo(ctx context.Context, addr string, reqs []fsm.Request) ([]fsm.Result, error) {
	resp, err := n.fwd.send(ctx, addr, &forwardRequest{Op: opAllow, Requests: reqs})
	if err != nil {
		return nil, err
	}
	return resp.Results, errorFor(resp)
}

// ForwardCommandTo asks addr to append an encoded command, as a follower
// does, unchecked, and returns the error of the exchange.
func (n *Node) ForwardCommandTo(ctx context.Context, addr string, command []byte) error {
	resp, err := n.fwd.send(ctx, addr, &forwardRequest{Op: opCommand, Command: command})
	if err != nil {
		return err
	}
	return errorFor(resp)
}

// HoldCallsUntil makes this node hold its calls until then, as a lone
// voter does for holdAloneFor after it starts (members.awaitDialers).
func (n *Node) HoldCallsUntil(until time.Time) {
	n.members.startedAlone.until.Store(&until)
	n.members.startedAlone.over.Store(false)
}
