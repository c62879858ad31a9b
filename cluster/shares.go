package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/fsm"
)

// Local shares: a node that sees a key often takes part of the key's
// budget through the log, riding on a request it sends anyway
// (fsm.ShareAsk), and admits the key's next requests from it on its own,
// without a round trip, until the share is spent or ends. Before it is
// spent, the node asks for the next one in the background, so a steady key
// never waits on the log.
//
// Exactness is the state machine's: it charges a share as if every unit
// were spent at the share's end (algorithms.Grant). The node's part is to
// stop spending by then: a share granted until cluster time U, answering a
// request sent at s and decided at cluster time t, is spent until
// s + (U − t)/(1 + MaxClockRate) − margin on this node's monotonic clock,
// which is no later than U, as for a deny lease. A change of policy waits
// out every share granted before it (leaseGrants), and a node that stops
// cleanly gives back what it did not spend; one that crashes gives back
// nothing, which costs units until its shares end, never an admission too
// many.
//
// Which keys: a request of one check, with no request ID or max_wait, whose
// policy (or inline limit) has local_shares. A node asks for a share once
// it saw the key twice within a share's TTL, and asks for twice what it
// admitted of the key in the last TTL, within the policy's max_units (the
// state machine grants at most half of what the key has left).

const (
	// maxShareKeys bounds the keys a node tracks for shares; beyond it,
	// requests of new keys go to the log as without shares.
	maxShareKeys = 1 << 16
	// hotAfter is how many requests of a key within a share's TTL make the
	// node ask for a share of it.
	hotAfter = 2
	// renewTimeout bounds a background ask for the next share.
	renewTimeout = 5 * time.Second
)

// shareTable is one node's shares, by the key they share (requestKey of
// the one-check request).
type shareTable struct {
	rate    float64 // Config.MaxClockRate
	now     func() time.Time
	metrics *nodeMetrics

	mu    sync.Mutex
	byKey map[string]*keyShares
}

// keyShares is what a node holds of, and knows about, one key.
type keyShares struct {
	check  fsm.Check // the key's check, cost 0: what a renewal or a give-back names
	ttl    time.Duration
	most   int64
	shares []*heldShare // oldest first
	// asking, when not nil, is closed when the ask under way is answered.
	asking chan struct{}
	// What the node saw of the key: requests and units in the current
	// window (a TTL long, from seenFrom) and the one before.
	seenFrom               time.Time
	requests, lastRequests int64
	units, lastUnits       int64
	lastUsed               time.Time
	// granted: the last ask brought a share; renewing: the ask under way
	// is a renewal; closed: the node is stopping and takes no more.
	granted, renewing, closed bool
}

// heldShare is one share this node holds.
type heldShare struct {
	id          uint64
	units, left int64
	until       time.Time // monotonic: when the node stops spending it
	sentAt      time.Time // when the request that brought it was sent
	grant       fsm.Result
}

func newShareTable(rate float64, now func() time.Time, m *nodeMetrics) *shareTable {
	return &shareTable{rate: rate, now: now, metrics: m, byKey: make(map[string]*keyShares)}
}

// sharesOf returns the local_shares that let r be answered from a share,
// nil when it may not be: r must be leasable, of one check, and its policy
// (as this node applied it) or its inline limit (inline) must have
// local_shares.
func (n *Node) sharesOf(r *fsm.Request, inline *contract.LocalShares) *contract.LocalShares {
	if !leasable(r) || r.RLS != nil || len(r.Checks) != 1 || r.Share != nil || r.Settle != nil {
		return nil
	}
	if p := r.Checks[0].Policy; p != "" {
		return n.fsm.LocalSharesOf(p)
	}
	return inline
}

// shareTake is what take tells the caller to do with a request.
type shareTake struct {
	answered bool
	result   fsm.Result // when answered
	ask      *fsm.ShareAsk
	renew    *fsm.Request // when set, ask for the next share in the background
}

// take answers r (of the key named key) from a share this node holds, or
// says how to send it: with a share ask, when the key is hot and no ask is
// under way, else as it is. While an ask of the key is under way, it waits
// for its answer first.
func (t *shareTable) take(ctx context.Context, key string, r *fsm.Request, cfg *contract.LocalShares) shareTake {
	cost := r.Checks[0].Cost
	counted, waited := false, false
	for {
		t.mu.Lock()
		ks := t.entry(key, r, cfg)
		if ks == nil {
			t.mu.Unlock()
			return shareTake{}
		}
		now := t.now()
		if !counted {
			ks.see(now, cost)
			counted = true
		}
		if h := ks.spendable(t, now, cost); h != nil {
			h.left -= cost
			out := shareTake{answered: true, result: h.answer(now, ks.left(now), t.rate)}
			out.renew = ks.renewal(now)
			t.mu.Unlock()
			t.metrics.shareUnits.WithLabelValues("spent").Add(float64(cost))
			return out
		}
		switch {
		case ks.asking == nil && !waited:
			var out shareTake
			if ks.requests+ks.lastRequests >= hotAfter {
				out.ask = ks.ask(cost)
				ks.asking = make(chan struct{})
			}
			t.mu.Unlock()
			return out
		case ks.asking == nil || waited || !ks.granted:
			// Waiting again, or for an ask that will likely bring
			// nothing, would line the key's requests up one by one.
			t.mu.Unlock()
			return shareTake{}
		}
		asking := ks.asking
		t.mu.Unlock()
		select {
		case <-asking:
			waited = true
		case <-ctx.Done():
			return shareTake{}
		}
	}
}

// entry returns key's entry, made for r when new; nil when the table is
// full.
func (t *shareTable) entry(key string, r *fsm.Request, cfg *contract.LocalShares) *keyShares {
	ks := t.byKey[key]
	if ks == nil {
		if len(t.byKey) >= maxShareKeys && !t.sweep() {
			return nil
		}
		check := r.Checks[0]
		check.Cost = 0
		ks = &keyShares{check: check}
		t.byKey[key] = ks
	}
	ks.ttl = time.Duration(cfg.TTL())
	switch {
	case r.Checks[0].Policy == "":
		ks.most = cfg.MaxUnitsOf(r.Checks[0].Limit())
	case cfg.MaxUnits > 0:
		ks.most = cfg.MaxUnits
	default:
		// A policy key's limit is only known where it is applied: the
		// state machine bounds the grant by it.
		ks.most = algorithms.MaxBurst
	}
	return ks
}

// sweep drops the entries of keys that hold nothing and were not used for
// a TTL, and reports whether that made room.
func (t *shareTable) sweep() bool {
	now := t.now()
	for key, ks := range t.byKey {
		if ks.asking == nil && !ks.renewing && ks.left(now) == 0 && now.Sub(ks.lastUsed) > ks.ttl {
			t.expired(ks, now)
			delete(t.byKey, key)
		}
	}
	return len(t.byKey) < maxShareKeys
}

// see counts a request of cost on the key.
func (ks *keyShares) see(now time.Time, cost int64) {
	if now.Sub(ks.seenFrom) >= ks.ttl {
		ks.lastRequests, ks.lastUnits = ks.requests, ks.units
		if now.Sub(ks.seenFrom) >= 2*ks.ttl {
			ks.lastRequests, ks.lastUnits = 0, 0
		}
		ks.requests, ks.units, ks.seenFrom = 0, 0, now
	}
	ks.requests++
	ks.units += cost
	ks.lastUsed = now
}

// spendable returns the oldest share with cost left that has not ended,
// after dropping the ones that ended or are spent.
func (ks *keyShares) spendable(t *shareTable, now time.Time, cost int64) *heldShare {
	kept := ks.shares[:0]
	var found *heldShare
	for _, h := range ks.shares {
		switch {
		case !now.Before(h.until):
			t.metrics.shareUnits.WithLabelValues("expired").Add(float64(h.left))
		case h.left == 0 && cost > 0:
		default:
			kept = append(kept, h)
			if found == nil && h.left >= cost {
				found = h
			}
		}
	}
	clear(ks.shares[len(kept):])
	ks.shares = kept
	return found
}

// left is what the node has left in live shares of the key.
func (ks *keyShares) left(now time.Time) int64 {
	var n int64
	for _, h := range ks.shares {
		if now.Before(h.until) {
			n += h.left
		}
	}
	return n
}

// ask is the share to ask for: twice what the node admitted of the key in
// the last TTL, at least twice cost and at least 2, at most most.
func (ks *keyShares) ask(cost int64) *fsm.ShareAsk {
	units := min(max(2*max(ks.units, ks.lastUnits), 2*cost, 2), ks.most)
	return &fsm.ShareAsk{Units: units, TTLNanos: int64(ks.ttl)}
}

// renewal returns the request that asks for the key's next share when it
// is due (the newest share half spent or half over) and none is under way.
func (ks *keyShares) renewal(now time.Time) *fsm.Request {
	if ks.asking != nil || ks.renewing || ks.closed || len(ks.shares) == 0 {
		return nil
	}
	newest := ks.shares[len(ks.shares)-1]
	if 2*newest.left > newest.units && 2*newest.until.Sub(now) > newest.until.Sub(newest.sentAt) {
		return nil
	}
	ks.renewing = true
	ks.asking = make(chan struct{})
	return &fsm.Request{Checks: []fsm.Check{ks.check}, Share: ks.ask(0)}
}

// settle takes the answer to an ask of key sent at sentAt (nil when it
// failed): a granted share is held from now on, and the requests waiting
// for the ask look again.
func (t *shareTable) settle(key string, sentAt time.Time, res *fsm.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ks := t.byKey[key]
	if ks == nil {
		return
	}
	if ks.asking != nil {
		close(ks.asking)
		ks.asking = nil
	}
	ks.renewing = false
	ks.granted = res != nil && res.Share != nil
	if !ks.granted || ks.closed {
		return
	}
	g := res.Share
	lasts := time.Duration(float64(g.UntilNanos-res.AtNanos)/(1+t.rate)) - denyLeaseMargin
	if lasts <= 0 {
		return
	}
	grant := *res
	grant.Checks = append([]fsm.CheckResult(nil), res.Checks...)
	grant.Checks[0].Decision.Remaining = g.Remaining
	ks.shares = append(ks.shares, &heldShare{id: g.ID, units: g.Units, left: g.Units, until: sentAt.Add(lasts), sentAt: sentAt, grant: grant})
	t.metrics.shareUnits.WithLabelValues("granted").Add(float64(g.Units))
}

// answer is the admission a share gives now: the grant's decision, with
// what is left counted as what the key had left for others when the share
// was granted plus what this node holds (left), and its waits shorter by
// the time since the grant's request was sent.
func (h *heldShare) answer(now time.Time, left int64, rate float64) fsm.Result {
	out := h.grant
	out.Checks = []fsm.CheckResult{h.grant.Checks[0]}
	e := int64(now.Sub(h.sentAt))
	d := &out.Checks[0].Decision
	d.Allowed, d.RetryAfterNanos, d.WaitNanos = true, 0, 0
	d.Remaining = min(d.Remaining+left, d.Limit)
	d.ResetAfterNanos, d.RefillAfterNanos = max(d.ResetAfterNanos-e, 0), max(d.RefillAfterNanos-e, 0)
	out.AtNanos = h.grant.AtNanos + e + int64(float64(e)*rate)
	out.Share, out.Shared, out.DenyAtNanos, out.DenyForNanos = nil, true, 0, 0
	return out
}

// expired counts what the key's shares held when the node let go of them.
func (t *shareTable) expired(ks *keyShares, now time.Time) {
	for _, h := range ks.shares {
		if h.left > 0 {
			t.metrics.shareUnits.WithLabelValues("expired").Add(float64(h.left))
		}
	}
	ks.shares = nil
}

// returnable lists, and lets go of, every live share with units left: what
// a node that stops gives back.
func (t *shareTable) returnable() []fsm.ReturnShareCommand {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var out []fsm.ReturnShareCommand
	for _, ks := range t.byKey {
		ks.closed = true
		for _, h := range ks.shares {
			if h.left > 0 && now.Before(h.until) {
				out = append(out, fsm.ReturnShareCommand{Check: ks.check, ShareID: h.id, Unspent: h.left})
			}
		}
		ks.shares = nil
	}
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
			n.shares.settle(key, sentAt, nil)
			return
		}
		n.shares.settle(key, sentAt, &results[0])
	}()
}

// giveBackShares returns, through the log, what this node did not spend
// of its shares: on a clean stop, so that it costs the others nothing.
func (n *Node) giveBackShares(ctx context.Context) {
	for _, cmd := range n.shares.returnable() {
		r, err := commandOnLeader[fsm.ShareReturn](ctx, n, fsm.CommandReturnShare, &cmd)
		if err != nil {
			n.logger.Debug("could not give a share back; its units are lost until it ends", "units", cmd.Unspent, "err", err)
			continue
		}
		n.metrics.shareUnits.WithLabelValues("returned").Add(float64(r.Units))
	}
}
