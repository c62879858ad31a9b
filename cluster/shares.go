package cluster

import (
	"context"
	"log/slog"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster/internal/denylease"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/holdtime"
	"github.com/limitnode/limitnode/internal/sharetable"
	"github.com/limitnode/limitnode/rls"
)

// Local shares: a node that sees a key often takes part of the key's
// budget through the log, riding on a request it sends anyway
// (fsm.ShareAsk), and admits the key's next requests from it on its own,
// without a round trip, until the share is spent or ends. Before it is
// spent, the node asks for the next one in the background, so a steady key
// never waits on the log. Which keys, how much and when is
// internal/sharetable's, shared with the Go client.
//
// Exactness is the state machine's: it charges a share as if every unit
// were spent at the share's end (algorithms.Grant). The node's part is to
// stop spending by then: a share granted until cluster time U, answering a
// request sent at s and decided at cluster time t, is spent until
// s + (U − t)/(1 + MaxClockRate) − margin on this node's monotonic clock,
// which is no later than U, as for a deny lease (spendFor). A change of
// policy waits out every share granted before it (leaseGrants). The node
// gives back what it did not spend of a share when a newer one of its key
// arrives, when the share nears its end, and when the node stops cleanly
// (sharetable's GiveBack, giveBack); one that crashes gives back nothing,
// which costs units until its shares end, never an admission too many.
// Each share is the node's own: asked for as fsm.NodeHolder with a secret
// only this process knows.
//
// Which requests: one check, with no request ID or max_wait, whose policy
// (or inline limit) has local_shares; or an RLS query of one descriptor,
// without a limit override, whose rate_limit in the domain has
// local_shares (fsm.FSM.RLSSharesOf). A query of several descriptors is
// decided all or nothing in one entry, so it always goes to the leader.

// renewTimeout bounds a background ask for the next share.
const renewTimeout = 5 * time.Second

// shareTable is a node's shares: by what the request counts on
// (fsm.Request.CountsOn), named to the log by its one check or its query's
// one descriptor (shareName), answering from the grant's result.
type shareTable = sharetable.Table[shareName, fsm.Result]

// shareName names a shared key to the log: a check (its cost not used),
// or a domain and the entries of one descriptor (entries not nil). It
// holds what the request holds, so naming costs no allocation.
type shareName struct {
	check   fsm.Check
	domain  string
	entries []rls.Entry
}

// nameOf is what names r's key to the log, and what r costs: r's one
// check, or its query's one descriptor.
func nameOf(r *fsm.Request) (name shareName, cost int64) {
	if q := r.RLS; q != nil {
		d := &q.Descriptors[0]
		return shareName{domain: q.Domain, entries: d.Entries}, d.Hits
	}
	return shareName{check: r.Checks[0]}, r.Checks[0].Cost
}

// request is the request of cost 0 that asks for the key's next share
// with ask.
func (s shareName) request(ask *fsm.ShareAsk) fsm.Request {
	if s.entries != nil {
		return fsm.Request{RLS: &rls.Query{Domain: s.domain, Descriptors: []rls.QueryDescriptor{{Entries: s.entries}}}, Share: ask}
	}
	check := s.check
	check.Cost = 0
	return fsm.Request{Checks: []fsm.Check{check}, Share: ask}
}

// shareHolder is the node's side of local shares: the table of the shares
// it holds, the asks that bring them, and the returns that give back what
// it did not spend.
type shareHolder struct {
	table *shareTable
	self  string   // this node's ID: it asks as fsm.NodeHolder(self)
	fsm   *fsm.FSM // the local_shares of policies and domains, as applied here
	route *leaderRoute
	// decide asks the leader (Node.decideOnLeader), for a renewal.
	decide       func(ctx context.Context, reqs []fsm.Request) ([]fsm.Result, string, error)
	maxClockRate float64
	stop         <-chan struct{}
	metrics      *nodeMetrics
	logger       *slog.Logger
}

// newShareHolder returns a node's holder, its table counting units in the
// node's metrics and giving back what it retires (giveBack).
func newShareHolder(h shareHolder) *shareHolder {
	out := &h
	t := sharetable.New[shareName, fsm.Result](time.Now)
	t.Count = func(outcome string, units int64) { h.metrics.shareUnits.WithLabelValues(outcome).Add(float64(units)) }
	t.GiveBack = func(returns []sharetable.Return[shareName]) {
		ctx, cancel := context.WithTimeout(context.Background(), renewTimeout)
		defer cancel()
		out.giveBack(ctx, returns, true)
	}
	out.table = t
	return out
}

// shareStage is decide's second stage: an admission from units this node
// holds of a hot key's limit, and the share ask that brings the next ones.
type shareStage struct{ h *shareHolder }

func (s shareStage) answer(ctx context.Context, p *pending) (fsm.Result, bool) {
	if p.probing { // it asks on behalf of its kind's waiters, as it is
		return fsm.Result{}, false
	}
	cfg, most := s.h.sharesOf(&p.req, p.inline)
	if cfg == nil {
		return fsm.Result{}, false
	}
	key := p.req.CountsOn()
	res, answered, ask := s.h.take(ctx, key, &p.req, cfg, most)
	if answered {
		return res, true
	}
	if ask != nil {
		p.req.Share, p.shareKey = ask, key
	}
	return fsm.Result{}, false
}

func (s shareStage) settle(p *pending, sentAt time.Time, res *fsm.Result) {
	if p.shareKey == "" {
		return
	}
	s.h.settle(p.shareKey, sentAt, p.req.Share, res)
	if res != nil {
		res.Share = nil // the node's own, not the caller's
	}
}

func (s shareStage) count(answered int) {
	if answered > 0 {
		s.h.metrics.shareAnswers.Add(float64(answered))
	}
}

// sharesOf returns the local_shares that let r be answered from a share,
// and the most units one share of it holds; nil when r may not be: r must
// be leasable and ask for no share or settlement itself, and be of one
// check whose policy (as this node applied it) or inline limit (inline)
// has local_shares, or an RLS query of one descriptor whose rate_limit
// has them (as this node applied the domain).
func (h *shareHolder) sharesOf(r *fsm.Request, inline *contract.LocalShares) (cfg *contract.LocalShares, most int64) {
	if !denylease.Leasable(r) || r.Share != nil || r.Settle != nil {
		return nil, 0
	}
	if r.RLS != nil {
		cfg, l := h.fsm.RLSSharesOf(r.RLS)
		if cfg == nil {
			return nil, 0
		}
		return cfg, cfg.MaxUnitsOf(l)
	}
	if len(r.Checks) != 1 {
		return nil, 0
	}
	check := &r.Checks[0]
	if check.Policy == "" {
		if inline == nil {
			return nil, 0
		}
		return inline, inline.MaxUnitsOf(check.Limit())
	}
	cfg = h.fsm.LocalSharesOf(check.Policy)
	switch {
	case cfg == nil:
		return nil, 0
	case cfg.MaxUnits > 0:
		return cfg, cfg.MaxUnits
	}
	return cfg, int64(algorithms.MaxBurst) // a policy key's limit is known where it is applied, which bounds the grant
}

// take answers r from a share this node holds (answered), or returns
// the share ask to send it with (nil: send it as it is). key is what r
// counts on (fsm.Request.CountsOn), cfg its local_shares and most the
// most units a share of it holds.
func (h *shareHolder) take(ctx context.Context, key string, r *fsm.Request, cfg *contract.LocalShares, most int64) (res fsm.Result, answered bool, ask *fsm.ShareAsk) {
	name, cost := nameOf(r)
	ttl := cfg.TTLOrDefault()
	taken := h.table.Take(ctx, sharetable.Key[shareName]{Name: key, ID: name, TTL: ttl, Most: most, Cost: cost})
	if taken.Renew > 0 {
		renewal := name.request(h.ask(taken.Renew, ttl))
		h.renew(key, &renewal)
	}
	if taken.Answered {
		return sharedAnswer(taken.Template, taken.Since, taken.Left, h.maxClockRate), true, nil
	}
	if taken.Ask > 0 {
		return fsm.Result{}, false, h.ask(taken.Ask, ttl)
	}
	return fsm.Result{}, false, nil
}

// ask asks for a share of units for ttl, held by this node.
func (h *shareHolder) ask(units int64, ttl time.Duration) *fsm.ShareAsk {
	return fsm.NewShareAsk(units, int64(ttl), fsm.NodeHolder(h.self))
}

// settle takes the answer to ask, a share ask of key sent at sentAt
// (res is nil when the request failed).
func (h *shareHolder) settle(key string, sentAt time.Time, ask *fsm.ShareAsk, res *fsm.Result) {
	if res == nil || res.Share == nil {
		h.table.Settle(key, sentAt, nil, fsm.Result{})
		return
	}
	g := res.Share
	grant := *res
	grant.Checks = append([]fsm.CheckResult(nil), res.Checks...)
	grant.Checks[0].Decision.Remaining = g.Remaining
	token := contract.ShareToken{ID: g.ID, Secret: ask.Secret}
	h.table.Settle(key, sentAt, &sharetable.Grant{Token: token.String(), Units: g.Units, SpendFor: spendFor(res, h.maxClockRate)}, grant)
}

// spendFor is how long after its request was sent the share res brought
// may be spent: its TTL in cluster time less what cluster time may run
// ahead of real time (rate) and the margin.
func spendFor(res *fsm.Result, rate float64) time.Duration {
	return holdtime.Lasts(res.Share.UntilNanos-res.AtNanos, rate)
}

// sharedAnswer is the admission a share gives since after its grant's
// request was sent: the grant's decision, with what is left counted as what
// the key had left for others when the share was granted plus what this
// node holds (left), and its waits shorter by since.
func sharedAnswer(grant fsm.Result, since time.Duration, left int64, rate float64) fsm.Result {
	grant.Checks = grant.Checks[:1]
	out := grant.WaitsShortenedBy(since)
	d := &out.Checks[0].Decision
	d.Allowed, d.RetryAfter, d.Wait = true, 0, 0
	d.Remaining = min(d.Remaining+left, d.Limit)
	out.AtNanos = holdtime.LatestClusterTime(grant.AtNanos, since, rate)
	out.Share, out.Shared, out.DenyAtNanos, out.DenyForNanos = nil, true, 0, 0
	return out
}

// renew asks for key's next share in the background.
func (h *shareHolder) renew(key string, req *fsm.Request) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), renewTimeout)
		defer cancel()
		go func() {
			select {
			case <-h.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		sentAt := time.Now()
		results, _, err := h.decide(ctx, []fsm.Request{*req})
		if err != nil {
			h.settle(key, sentAt, req.Share, nil)
			return
		}
		h.settle(key, sentAt, req.Share, &results[0])
	}()
}

// giveBackAll returns, through the log, what this node did not spend of
// its shares: on a clean stop, so that it costs the others nothing.
func (h *shareHolder) giveBackAll(ctx context.Context) {
	h.giveBack(ctx, h.table.Close(), false)
}

// giveBack returns, through the log, what this node did not spend of the
// shares in returns. In the background (a share the table retired), no
// caller waits for the return, so the leader answers it once applied
// instead of waiting out the deny leases first.
func (h *shareHolder) giveBack(ctx context.Context, returns []sharetable.Return[shareName], background bool) {
	for _, ret := range returns {
		token, err := contract.ParseShareToken(ret.Token, "id")
		if err != nil {
			h.logger.Error("cluster: a share's token does not parse; its units are lost until it ends", "units", ret.Unspent)
			continue
		}
		if _, err := h.returnShare(ctx, ret.Key, token, ret.Unspent, fsm.NodeHolder(h.self), background); err != nil {
			h.logger.Debug("could not give a share back; its units are lost until it ends", "units", ret.Unspent, "err", err)
		}
	}
}

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
	return n.shares.returnShare(ctx, shareName{check: fsm.CheckOf(ret.Check)}, ret.Token, ret.Unspent, ret.Holder, ret.Background)
}

// returnShare gives back unspent units of the share token names, a share
// of the key name names held by holder, through the log; in the
// background, the leader does not wait out the deny leases before it
// answers (see fsm.ReturnShareCommand).
func (h *shareHolder) returnShare(ctx context.Context, name shareName, token contract.ShareToken, unspent int64, holder string, background bool) (int64, error) {
	named := name.request(nil)
	cmd := fsm.ReturnShareCommand{ShareID: token.ID, Unspent: unspent, Holder: holder, Proof: fsm.ShareProof(token.Secret), Background: background, RLS: named.RLS}
	if named.RLS == nil {
		cmd.Check = named.Checks[0]
	}
	if err := cmd.Validate(); err != nil {
		return 0, err
	}
	r, err := commandOnLeader[fsm.ShareReturn](ctx, h.route, fsm.CommandReturnShare, &cmd)
	if err != nil {
		return 0, err
	}
	return r.Units, nil
}
