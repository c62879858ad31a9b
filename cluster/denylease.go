package cluster

import (
	"context"
	"time"

	"github.com/limitnode/limitnode/cluster/internal/denylease"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/holdtime"
)

// leaseStage is decide's first stage: a denial the leader gave a request
// of the same kind, answered again from the node's deny leases
// (package denylease) while it holds.
type leaseStage struct {
	t       *denylease.Table // nil: deny leases are off
	metrics *nodeMetrics
}

func (s leaseStage) answer(ctx context.Context, p *pending) (fsm.Result, bool) {
	if s.t == nil || !denylease.Leasable(&p.req) || !s.t.HoldsAny() {
		return fsm.Result{}, false
	}
	p.kind = denylease.KindOf(&p.req)
	res, ok, probing := s.t.Answer(ctx, p.kind)
	p.probing = probing
	return res, ok
}

func (s leaseStage) settle(p *pending, sentAt time.Time, res *fsm.Result) {
	switch {
	case s.t == nil:
	case res == nil:
		if p.probing {
			s.t.Settle(p.kind, &p.req, sentAt, &fsm.Result{Allowed: true}) // let its waiters ask
		}
	case res.DenyForNanos > 0 && denylease.Leasable(&p.req):
		if p.kind == "" {
			p.kind = denylease.KindOf(&p.req)
		}
		if s.t.Settle(p.kind, &p.req, sentAt, res) {
			s.metrics.leasesTaken.Inc()
		}
	case p.probing:
		s.t.Settle(p.kind, &p.req, sentAt, res)
	}
}

func (s leaseStage) count(answered int) {
	if answered > 0 {
		s.metrics.leaseDenials.Add(float64(answered))
	}
}

// waitOutLeases is the raise rule: it returns once every deny lease that
// could contradict a raising command applied now has ended, and every
// share granted under the state before it, or when the node stops.
func (n *Node) waitOutLeases() {
	if n.skipRaiseWait.Load() {
		return
	}
	// Shares (shares.go) are waited out as deny leases are: a share
	// lasts at most contract.MaxShareTTL.
	wait := n.leaseGrants.RaiseWait(n.raft.CurrentTerm(), max(n.cfg.DenyLeaseCap, contract.MaxShareTTL)+holdtime.Margin)
	if wait <= 0 {
		return
	}
	n.metrics.raiseWaits.Observe(wait.Seconds())
	select {
	case <-time.After(wait):
	case <-n.stopCh:
	}
}
