package cluster

import (
	"context"

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
