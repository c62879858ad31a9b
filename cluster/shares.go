package cluster

import (
	"context"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster/internal/denylease"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/holdtime"
	"github.com/limitnode/limitnode/internal/sharetable"
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
// (or inline limit) has local_shares.

// renewTimeout bounds a background ask for the next share.
const renewTimeout = 5 * time.Second

// shareTable is a node's shares: by what the one-check request counts on
// (fsm.Request.CountsOn),
// named to the log by the check (cost 0), answering from the grant's
// result.
type shareTable = sharetable.Table[fsm.Check, fsm.Result]

// newShareTable is the node's table, counting units in the node's metrics
// and giving back what the table retires with giveBack.
func (n *Node) newShareTable() *shareTable {
	t := sharetable.New[fsm.Check, fsm.Result](time.Now)
	t.Count = func(outcome string, units int64) { n.metrics.shareUnits.WithLabelValues(outcome).Add(float64(units)) }
	t.GiveBack = func(returns []sharetable.Return[fsm.Check]) {
		ctx, cancel := context.WithTimeout(context.Background(), renewTimeout)
		defer cancel()
		n.giveBack(ctx, returns, true)
	}
	return t
}

// shareStage is decide's second stage: an admission from units this node
// holds of a hot key's limit, and the share ask that brings the next ones.
type shareStage struct{ n *Node }

func (n *Node) shareStage() shareStage { return shareStage{n: n} }

func (s shareStage) answer(ctx context.Context, p *pending) (fsm.Result, bool) {
	if p.probing { // it asks on behalf of its kind's waiters, as it is
		return fsm.Result{}, false
	}
	cfg := s.n.sharesOf(&p.req, p.inline)
	if cfg == nil {
		return fsm.Result{}, false
	}
	key := p.req.CountsOn()
	res, answered, ask := s.n.takeShare(ctx, key, &p.req, cfg)
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
	s.n.settleShare(p.shareKey, sentAt, p.req.Share, res)
	if res != nil {
		res.Share = nil // the node's own, not the caller's
	}
}

func (s shareStage) count(answered int) {
	if answered > 0 {
		s.n.metrics.shareAnswers.Add(float64(answered))
	}
}

// sharesOf returns the local_shares that let r be answered from a share,
// nil when it may not be: r must be leasable, of one check, and its policy
// (as this node applied it) or its inline limit (inline) must have
// local_shares.
func (n *Node) sharesOf(r *fsm.Request, inline *contract.LocalShares) *contract.LocalShares {
	if !denylease.Leasable(r) || r.RLS != nil || len(r.Checks) != 1 || r.Share != nil || r.Settle != nil {
		return nil
	}
	if p := r.Checks[0].Policy; p != "" {
		return n.fsm.LocalSharesOf(p)
	}
	return inline
}

// takeShare answers r from a share this node holds (answered), or returns
// the share ask to send it with (nil: send it as it is). key is what r
// counts on (fsm.Request.CountsOn).
func (n *Node) takeShare(ctx context.Context, key string, r *fsm.Request, cfg *contract.LocalShares) (res fsm.Result, answered bool, ask *fsm.ShareAsk) {
	check := r.Checks[0]
	most := int64(algorithms.MaxBurst) // a policy key's limit is known where it is applied, which bounds the grant
	switch {
	case check.Policy == "":
		most = cfg.MaxUnitsOf(check.Limit())
	case cfg.MaxUnits > 0:
		most = cfg.MaxUnits
	}
	named := check
	named.Cost = 0
	ttl := cfg.TTLOrDefault()
	taken := n.shares.Take(ctx, sharetable.Key[fsm.Check]{Name: key, ID: named, TTL: ttl, Most: most, Cost: check.Cost})
	if taken.Renew > 0 {
		n.renewShare(key, &fsm.Request{Checks: []fsm.Check{named}, Share: n.shareAsk(taken.Renew, ttl)})
	}
	if taken.Answered {
		return sharedAnswer(taken.Template, taken.Since, taken.Left, n.cfg.MaxClockRate), true, nil
	}
	if taken.Ask > 0 {
		return fsm.Result{}, false, n.shareAsk(taken.Ask, ttl)
	}
	return fsm.Result{}, false, nil
}

// shareAsk asks for a share of units for ttl, held by this node.
func (n *Node) shareAsk(units int64, ttl time.Duration) *fsm.ShareAsk {
	return fsm.NewShareAsk(units, int64(ttl), fsm.NodeHolder(n.cfg.ID))
}

// settleShare takes the answer to ask, a share ask of key sent at sentAt
// (res is nil when the request failed).
func (n *Node) settleShare(key string, sentAt time.Time, ask *fsm.ShareAsk, res *fsm.Result) {
	if res == nil || res.Share == nil {
		n.shares.Settle(key, sentAt, nil, fsm.Result{})
		return
	}
	g := res.Share
	grant := *res
	grant.Checks = append([]fsm.CheckResult(nil), res.Checks...)
	grant.Checks[0].Decision.Remaining = g.Remaining
	token := contract.ShareToken{ID: g.ID, Secret: ask.Secret}
	n.shares.Settle(key, sentAt, &sharetable.Grant{Token: token.String(), Units: g.Units, SpendFor: spendFor(res, n.cfg.MaxClockRate)}, grant)
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

// renewShare asks for key's next share in the background.
func (n *Node) renewShare(key string, req *fsm.Request) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), renewTimeout)
		defer cancel()
		go func() {
			select {
			case <-n.stopCh:
				cancel()
			case <-ctx.Done():
			}
		}()
		sentAt := time.Now()
		results, _, err := n.decideOnLeader(ctx, []fsm.Request{*req})
		if err != nil {
			n.settleShare(key, sentAt, req.Share, nil)
			return
		}
		n.settleShare(key, sentAt, req.Share, &results[0])
	}()
}

// giveBackShares returns, through the log, what this node did not spend
// of its shares: on a clean stop, so that it costs the others nothing.
func (n *Node) giveBackShares(ctx context.Context) {
	n.giveBack(ctx, n.shares.Close(), false)
}

// giveBack returns, through the log, what this node did not spend of the
// shares in returns. In the background (a share the table retired), no
// caller waits for the return, so the leader answers it once applied
// instead of waiting out the deny leases first.
func (n *Node) giveBack(ctx context.Context, returns []sharetable.Return[fsm.Check], background bool) {
	for _, ret := range returns {
		token, err := contract.ParseShareToken(ret.Token, "id")
		if err != nil {
			n.logger.Error("cluster: a share's token does not parse; its units are lost until it ends", "units", ret.Unspent)
			continue
		}
		if _, err := n.returnShare(ctx, ret.Key, token, ret.Unspent, fsm.NodeHolder(n.cfg.ID), background); err != nil {
			n.logger.Debug("could not give a share back; its units are lost until it ends", "units", ret.Unspent, "err", err)
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
