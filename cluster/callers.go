package cluster

import (
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// Bounds per caller: a caller is an API token (contract.Request.Scope for a
// decision, contract.Caller for a lease), and what one caller may hold of
// the cluster is bounded so that it cannot shut the others out. A
// reservation holds a key in debt for up to its max_wait, so max_wait is
// bounded (Config.MaxWaitPerCaller); leases are counted per caller in the
// replicated state (Config.MaxLeasesPerCaller, fsm's lease.go). New keys are
// not counted per caller: the cluster's cap (MaxKeys) bounds them, and a
// caller's keys are whatever keys its checks name, which a policy's key
// template may make from any dimension.

// requestOf is the package's requestOf, with this node's bounds per
// caller.
func (n *Node) requestOf(req contract.Request) (fsm.Request, error) {
	if req.MaxWaitNanos > int64(n.cfg.MaxWaitPerCaller) {
		return fsm.Request{}, contract.Invalid("max_wait", "max_wait is at most %s on this cluster: a reservation holds its key in debt for up to its wait, shutting other callers out of it for that long", n.cfg.MaxWaitPerCaller)
	}
	return requestOf(req)
}
