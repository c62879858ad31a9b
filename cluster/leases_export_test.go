package cluster

import (
	"context"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// AcquireLeaseWithID is AcquireLease with the ID of an earlier attempt, as
// the attempts after the first of one call send it.
func (n *Node) AcquireLeaseWithID(ctx context.Context, id string, req contract.LeaseRequest) (contract.Lease, error) {
	return n.leases.acquire(ctx, id, req)
}

// LeaseCommandOnLeader runs a lease command on the leader as it stands,
// like one attempt of AcquireLease, RenewLease or ReleaseLease whose
// answer the caller never heard.
func (n *Node) LeaseCommandOnLeader(ctx context.Context, t fsm.CommandType, cmd fsm.LeaseCommand) (*fsm.LeaseResult, error) {
	return n.leases.command(ctx, t, cmd)
}
