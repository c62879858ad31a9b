package cluster

import (
	"context"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// Allow decides req. It returns a *contract.Error for a request refused as
// it stands, contract.ErrNoLeader when no leader answered in time, contract.ErrOutcomeUnknown
// when the request may or may not have been decided, and contract.ErrShutdown after
// Close.
func (n *Node) Allow(ctx context.Context, req contract.Request) (contract.Decision, error) {
	fr, err := callerRequestOf(req, n.cfg.MaxWaitPerCaller)
	if err != nil {
		return contract.Decision{}, err
	}
	results, leader, err := n.decide(ctx, []fsm.Request{fr}, []*contract.LocalShares{inlineShares(req)})
	if err != nil {
		return contract.Decision{}, err
	}
	return decisionOf(results[0], leader, fr.Share, n.cfg.MaxClockRate)
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
		fr, err := callerRequestOf(r, n.cfg.MaxWaitPerCaller)
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
		out[index[j]].Decision, out[index[j]].Err = decisionOf(r, leader, valid[j].Share, n.cfg.MaxClockRate)
	}
	return out, nil
}

// decide answers reqs, a stage at a time, each stage asked only about what
// the ones before it left:
//
//  1. the deny leases (leaseStage): a denial the leader gave a request of
//     the same kind, repeated while it holds;
//  2. the node's shares (shareStage): an admission from units this node
//     holds of a hot key's limit;
//  3. the leader (decideOnLeader), for everything else: one message, one
//     group-commit entry, with a share ask where a key is hot.
//
// Each local stage then learns from the leader's answer to what it did
// not answer (settle): a denial that says how long it holds becomes a
// lease, a share granted is held. inline, when not nil, has the
// local_shares of each request's inline check. The leader named is ""
// when no request asked it.
func (n *Node) decide(ctx context.Context, reqs []fsm.Request, inline []*contract.LocalShares) ([]fsm.Result, string, error) {
	if err := n.members.awaitDialers(ctx); err != nil {
		return nil, "", err
	}
	if err := n.members.refuseOutside(); err != nil {
		return nil, "", err
	}
	stages := &n.stages
	out := make([]fsm.Result, len(reqs))
	each := make([]pending, len(reqs)) // one allocation for the call, not one a request
	var asked []*pending
	var answered []int // by a local stage
	var byStage [len(n.stages)]int
	changed := false // a stage added a share ask to a request it asks
stage:
	for i := range reqs {
		p := &each[i]
		*p = pending{index: i, req: reqs[i], inline: inlineSharesAt(inline, i)}
		for s, st := range stages {
			if res, ok := st.answer(ctx, p); ok {
				out[i] = res
				byStage[s]++
				answered = append(answered, i)
				continue stage
			}
		}
		asked = append(asked, p)
		changed = changed || p.shareKey != ""
	}
	for s, st := range stages {
		st.count(byStage[s])
	}
	if !n.cfg.NoStats {
		n.answeredHere.recordAnswered(reqs, out, answered)
	}
	if len(asked) == 0 {
		return out, "", nil
	}
	ask := reqs // every request asked as it came: no copy
	if len(asked) < len(reqs) || changed {
		ask = make([]fsm.Request, len(asked))
		for j, p := range asked {
			ask[j] = p.req
		}
	}
	sentAt := time.Now()
	results, leader, err := n.decideOnLeader(ctx, ask)
	if err == nil && !n.IsLeader() {
		n.commit.denied.Note(ask, results) // the leader noted them itself
	}
	for j, p := range asked {
		var res *fsm.Result // nil: the leader did not answer
		if err == nil {
			res = &results[j]
		}
		for s := len(stages) - 1; s >= 0; s-- { // the shares' first: the caller's answer drops the node's share
			stages[s].settle(p, sentAt, res)
		}
		if res != nil {
			out[p.index] = *res
		}
	}
	return out, leader, err
}

// pending is one request of a call to decide on its way through the
// stages: what the stages learned of it while they could not answer it.
type pending struct {
	index  int         // in the call's requests
	req    fsm.Request // as the leader is asked it (with a share ask, shareStage adds it)
	inline *contract.LocalShares

	kind     string // denylease.KindOf(req), once a lease was looked up
	probing  bool   // it asks the leader on behalf of its kind's waiters
	shareKey string // the key of the share it asks for; "" when it asks for none
}

// localStage is a stage of decide that answers on this node, without the
// leader.
type localStage interface {
	// answer returns p's answer when the stage has one (ok), noting in p
	// what it learned otherwise.
	answer(ctx context.Context, p *pending) (res fsm.Result, ok bool)
	// settle takes the leader's answer to p (nil: the leader did not
	// answer); it may change what the caller is answered.
	settle(p *pending, sentAt time.Time, res *fsm.Result)
	// count records how many requests of a call the stage answered.
	count(answered int)
}

// inlineSharesAt is the i-th of inline, or nil.
func inlineSharesAt(inline []*contract.LocalShares, i int) *contract.LocalShares {
	if i < len(inline) {
		return inline[i]
	}
	return nil
}

// decisionOf is the caller's decision of result r, decided by leader, of a
// request that asked for a share with ask (nil: none), on a node whose
// clock runs at most maxClockRate off the leader's (Config.MaxClockRate).
func decisionOf(r fsm.Result, leader string, ask *fsm.ShareAsk, maxClockRate float64) (contract.Decision, error) {
	if r.Rejection != nil {
		return contract.Decision{}, r.Rejection
	}
	d := contract.Decision{Allowed: r.Allowed, Duplicate: r.Duplicate, AtNanos: r.AtNanos, Leader: leader, Leased: r.Leased, Shared: r.Shared, Blocked: r.Blocked, DeniedBy: r.DeniedBy, SettlementID: r.SettlementID, Checks: make([]contract.CheckDecision, len(r.Checks))}
	if r.Leased || r.Shared {
		d.Leader = ""
	}
	if g := r.Share; g != nil && ask != nil {
		d.Share = &contract.GrantedShare{Token: contract.ShareToken{ID: g.ID, Secret: ask.Secret}, Units: g.Units, SpendFor: spendFor(&r, maxClockRate), Remaining: g.Remaining}
	}
	for i, c := range r.Checks {
		d.Checks[i] = contract.CheckDecision{Decision: c.Decision, Period: time.Duration(c.PeriodNanos), Rate: c.Rate, Key: c.Key, Shadow: c.Shadow}
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
	fr := fsm.Request{RequestID: req.RequestID, Scope: req.Scope, Checks: make([]fsm.Check, len(req.Checks)), MaxWait: int64(req.MaxWait)}
	if s := req.Share; s != nil {
		fr.Share = fsm.NewShareAsk(s.Units, int64(s.TTLOrDefault()), req.Scope)
	}
	for i, c := range req.Checks {
		fr.Checks[i] = fsm.CheckOf(c)
	}
	if req.SettleTTL > 0 {
		fr.Settle = &fsm.SettleAsk{TTLNanos: int64(req.SettleTTL)}
	}
	return fr, nil
}

// Settle settles an open settlement that an admission with SettleTTL
// answered with (contract.Decision.SettlementID), through the log: what it
// did not use of the cost charged up front is given back, what it used beyond is
// charged, up to its policy's MaxDebt beyond empty. Settling again with the
// same cost answers the first settlement (Duplicate) and changes nothing,
// so an unknown outcome is tried again, charged once; another cost is a
// *contract.Error with CodeConflict; an unknown or ended settlement, one
// with CodeNotFound. A settlement that gave units back gives capacity back:
// it is acknowledged once the deny leases that could contradict it have
// ended, as a policy change is.
func (n *Node) Settle(ctx context.Context, req contract.SettleRequest) (contract.Settlement, error) {
	if err := req.Validate(); err != nil {
		return contract.Settlement{}, err
	}
	r, err := commandOnLeader[fsm.SettleResult](ctx, n.route, fsm.CommandSettle, &fsm.SettleCommand{ID: req.ID, Scope: req.Scope, Cost: req.Cost})
	if err != nil {
		return contract.Settlement{}, err
	}
	return r.Settlement, nil
}

// Bounds per caller: a caller is an API token (contract.Request.Scope for a
// decision, contract.Caller for a lease), and what one caller may hold of
// the cluster is bounded so that it cannot shut the others out. A
// reservation holds a key in debt for up to its max_wait, so max_wait is
// bounded (Config.MaxWaitPerCaller); leases are counted per caller in the
// replicated state (Config.MaxLeasesPerCaller, fsm's lease.go). New keys are
// not counted per caller: the cluster's cap (MaxKeys) bounds them, and a
// caller's keys are whatever keys its checks name, which a policy's key
// template may make from any dimension.

// callerRequestOf is requestOf within the bound per caller of a node
// whose Config.MaxWaitPerCaller is maxWait.
func callerRequestOf(req contract.Request, maxWait time.Duration) (fsm.Request, error) {
	if req.MaxWait > maxWait {
		return fsm.Request{}, contract.Invalid("max_wait", "max_wait is at most %s on this cluster: a reservation holds its key in debt for up to its wait, shutting other callers out of it for that long", maxWait)
	}
	return requestOf(req)
}
