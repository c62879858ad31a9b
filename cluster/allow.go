package cluster

import (
	"context"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// ReturnShare gives back what a caller did not spend of a share it took
// with contract.Request.Share, and returns the units given back: 0 when the
// share has ended or was given back, or the key holds no state. A return
// by another holder than the one that asked, or with another secret, is
// refused (contract.CodePermissionDenied), as is one of more units than the
// share holds.
func (n *Node) ReturnShare(ctx context.Context, ret contract.ShareReturn) (int64, error) {
	if err := ret.Validate(); err != nil {
		return 0, err
	}
	return n.returnShare(ctx, fsm.CheckOf(ret.Check), ret.Token, ret.Unspent, ret.Holder, ret.Background)
}

// returnShare gives back unspent units of the share token names, a share
// of check's key held by holder, through the log; in the background, the
// leader does not wait out the deny leases before it answers (see
// fsm.ReturnShareCommand).
func (n *Node) returnShare(ctx context.Context, check fsm.Check, token contract.ShareToken, unspent int64, holder string, background bool) (int64, error) {
	check.Cost = 0
	cmd := fsm.ReturnShareCommand{Check: check, ShareID: token.ID, Unspent: unspent, Holder: holder, Proof: fsm.ShareProof(token.Secret), Background: background}
	if err := cmd.Validate(); err != nil {
		return 0, err
	}
	r, err := commandOnLeader[fsm.ShareReturn](ctx, n, fsm.CommandReturnShare, &cmd)
	if err != nil {
		return 0, err
	}
	return r.Units, nil
}

// Allow decides req. It returns a *contract.Error for a request refused as
// it stands, contract.ErrNoLeader when no leader answered in time, contract.ErrOutcomeUnknown
// when the request may or may not have been decided, and contract.ErrShutdown after
// Close.
func (n *Node) Allow(ctx context.Context, req contract.Request) (contract.Decision, error) {
	fr, err := n.requestOf(req)
	if err != nil {
		return contract.Decision{}, err
	}
	results, leader, err := n.decide(ctx, []fsm.Request{fr}, []*contract.LocalShares{inlineShares(req)})
	if err != nil {
		return contract.Decision{}, err
	}
	return n.decisionOf(results[0], leader, fr.Share)
}

// AllowBatch decides independent requests together: one message to the
// leader and one Raft entry (unless it exceeds MaxBatchRequests). Each
// request is atomic on its own; a bad request gets its own error and does
// not spoil the others. The error returned is for the batch as a whole
// (too large, no leader, outcome unknown).
func (n *Node) AllowBatch(ctx context.Context, reqs []contract.Request) ([]contract.BatchResult, error) {
	checks := 0
	for _, r := range reqs {
		checks += len(r.Checks)
	}
	if err := contract.ValidateBatchSize(len(reqs), checks); err != nil {
		return nil, err
	}
	out := make([]contract.BatchResult, len(reqs))
	var valid []fsm.Request
	var index []int
	var inline []*contract.LocalShares
	for i, r := range reqs {
		fr, err := n.requestOf(r)
		if err != nil {
			out[i].Err = err
			continue
		}
		valid, index, inline = append(valid, fr), append(index, i), append(inline, inlineShares(r))
	}
	if len(valid) == 0 {
		return out, nil
	}
	results, leader, err := n.decide(ctx, valid, inline)
	if err != nil {
		return nil, err
	}
	for j, r := range results {
		out[index[j]].Decision, out[index[j]].Err = n.decisionOf(r, leader, valid[j].Share)
	}
	return out, nil
}

// decisionOf is the caller's decision of result r, decided by leader, of a
// request that asked for a share with ask (nil: none).
func (n *Node) decisionOf(r fsm.Result, leader string, ask *fsm.ShareAsk) (contract.Decision, error) {
	if r.Rejection != nil {
		return contract.Decision{}, r.Rejection
	}
	d := contract.Decision{Allowed: r.Allowed, Duplicate: r.Duplicate, AtNanos: r.AtNanos, Leader: leader, Leased: r.Leased, Shared: r.Shared, Blocked: r.Blocked, DeniedBy: r.DeniedBy, SettlementID: r.SettlementID, Checks: make([]contract.CheckDecision, len(r.Checks))}
	if r.Leased || r.Shared {
		d.Leader = ""
	}
	if g := r.Share; g != nil && ask != nil {
		d.Share = &contract.GrantedShare{Token: contract.ShareToken{ID: g.ID, Secret: ask.Secret}, Units: g.Units, SpendForNanos: int64(spendFor(&r, n.cfg.MaxClockRate)), Remaining: g.Remaining}
	}
	for i, c := range r.Checks {
		d.Checks[i] = contract.CheckDecision{Decision: c.Decision, PeriodNanos: c.PeriodNanos, Rate: c.Rate, Key: c.Key, Shadow: c.Shadow}
	}
	return d, nil
}

// inlineShares is the local_shares of req's one inline check, if it has
// them (and it does not ask for a share itself).
func inlineShares(req contract.Request) *contract.LocalShares {
	if len(req.Checks) == 1 && req.Share == nil {
		return req.Checks[0].LocalShares
	}
	return nil
}

// requestOf validates what can be validated without the replicated state
// (policies are resolved when the request is applied) and builds the log's
// form of the request.
func requestOf(req contract.Request) (fsm.Request, error) {
	if err := req.Validate(); err != nil {
		return fsm.Request{}, err
	}
	fr := fsm.Request{RequestID: req.RequestID, Scope: req.Scope, Checks: make([]fsm.Check, len(req.Checks)), MaxWait: req.MaxWaitNanos}
	if s := req.Share; s != nil {
		fr.Share = fsm.NewShareAsk(s.Units, s.TTL(), req.Scope)
	}
	for i, c := range req.Checks {
		fr.Checks[i] = fsm.CheckOf(c)
	}
	if req.SettleTTLNanos > 0 {
		fr.Settle = &fsm.SettleAsk{TTLNanos: req.SettleTTLNanos}
	}
	return fr, nil
}
