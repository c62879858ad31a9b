package cluster

import (
	"context"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// Settle settles a reservation that an admission with SettleTTLNanos
// answered with (contract.Decision.SettlementID), through the log: what it
// did not use of the cost it reserved is given back, what it used beyond is
// charged, up to its policy's MaxDebt beyond empty. Settling again with the
// same cost answers the first settlement (Duplicate) and changes nothing,
// so an unknown outcome is tried again, charged once; another cost is a
// *contract.Error with CodeConflict; an unknown or ended reservation, one
// with CodeNotFound. A settlement that gave units back gives capacity back:
// it is acknowledged once the deny leases that could contradict it have
// ended, as a policy change is.
func (n *Node) Settle(ctx context.Context, req contract.SettleRequest) (contract.Settlement, error) {
	if err := req.Validate(); err != nil {
		return contract.Settlement{}, err
	}
	r, err := commandOnLeader[fsm.SettleResult](ctx, n, fsm.CommandSettle, &fsm.SettleCommand{ID: req.ID, Scope: req.Scope, Cost: req.Cost})
	if err != nil {
		return contract.Settlement{}, err
	}
	return r.Settlement, nil
}
