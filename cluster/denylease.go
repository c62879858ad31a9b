package cluster

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/holdtime"
)

// Deny leases: denials answered where they arrive, on any node, without a
// round trip. A denial consumes nothing, and as only time passes a denied
// request stays denied until the longest wait of the checks that deny it
// (time only adds capacity, under every algorithm). So when the leader
// denies a request it says for how long (fsm.Result.DenyForNanos), and the
// node that asked may answer the same request with the same denial until
// then, measured on its own monotonic clock from when it sent the request:
// the leader decided after that, so the lease ends no later than the
// denial does. Two bounds keep it there: cluster time runs at most
// MaxClockRate faster than real time (clock.go), which the lease gives
// away, and a lease lasts at most Config.DenyLeaseCap.
//
// What could make the denial wrong is a command that gives capacity back
// (fsm.CommandType.Raises: a policy or domain changed, a key reset, a
// restore). Such a command is acknowledged only once every lease that could
// contradict it has ended: the leader waits out the cap after it applied
// the command, unless it granted no lease for that long (raiseWait). Every
// node also drops its leases when it applies one, so that most see the
// change at once; the wait is what the guarantee rests on.
//
// When a lease ends, the next request of its kind goes to the leader alone:
// the others that arrive meanwhile wait for its answer (a new lease, or the
// news that it was admitted) instead of all going to the log.

// Defaults of the deny leases.
const (
	// DefaultDenyLeaseCap bounds a lease, and so how long a raising
	// command waits before it is acknowledged.
	DefaultDenyLeaseCap = time.Second
	// maxDenyLeases bounds a node's table: a flood over many keys keeps
	// the leases that fit, and the others ask the leader as before.
	maxDenyLeases = 1 << 16
)

// denyLeases is one node's table of deny leases, by the kind of request
// they answer (denyLeaseKey).
type denyLeases struct {
	cap  time.Duration
	rate float64 // Config.MaxClockRate
	now  func() time.Time

	mu     sync.Mutex
	byKind map[string]*denyLease
	live   atomic.Int64 // len(byKind), read without the lock
}

// denyLease is one lease: the denial to answer with until the lease ends,
// or, once it has ended, the request asking again on behalf of every
// request of its kind (probe).
type denyLease struct {
	until  time.Time // monotonic reading
	sentAt time.Time // when the request it answers was sent
	result fsm.Result
	// keys are the keys the denial counts on (leaseKeys), so that a
	// raise of one key drops only the leases it may contradict; nil for
	// a lease that may count on any.
	keys []string
	// probe, when not nil, is the request that asks again on behalf of
	// its kind; waiting counts the requests waiting for its answer.
	probe   *probe
	waiting int
}

// probe is a request asking the leader on behalf of its kind. done is
// closed when it has its answer; denial is then that answer when it was a
// denial that says how long it holds, and sentAt when the probe was sent.
//
// A request of the kind that began waiting before the probe was sent may
// take that denial as its own answer, however short it holds: the leader
// decided it after the probe was sent, so while the waiting request was
// under way, on the state every request of the kind shares (a denial of
// this kind changes nothing in it). That is its linearization point, and
// the time its answer gives.
type probe struct {
	done   chan struct{}
	sentAt time.Time
	denial *fsm.Result
}

// newDenyLeases is a table of leases of at most limit, for a cluster whose
// time runs at most rate faster than real time; nil (no leases) when limit
// is not positive.
func newDenyLeases(limit time.Duration, rate float64, now func() time.Time) *denyLeases {
	if limit <= 0 {
		return nil
	}
	return &denyLeases{cap: limit, rate: rate, now: now, byKind: make(map[string]*denyLease)}
}

// leasable reports whether a request may be answered from a lease, or may
// take one: one without a request ID (its answer would be the FSM's
// memory) and not waiting by reservation.
func leasable(r *fsm.Request) bool { return r.RequestID == "" && r.MaxWait == 0 }

// denyLeaseKey names a kind of request a lease answers: what it counts on
// (requestKey) and what each check or descriptor costs, so that a lease
// answers only the request it was taken for.
func denyLeaseKey(r *fsm.Request) string {
	var b strings.Builder
	b.WriteString(requestKey(r))
	b.WriteString("\x02")
	if r.RLS != nil {
		for _, d := range r.RLS.Descriptors {
			b.WriteString(strconv.FormatInt(d.Hits, 10) + ",")
		}
	}
	for _, c := range r.Checks {
		b.WriteString(strconv.FormatInt(c.Cost, 10) + ",")
	}
	return b.String()
}

// answer returns the denial a live lease gives req, or waits, when its
// lease has ended and another request of its kind is asking the leader,
// for that one's answer. ok is false when req must ask the leader itself;
// probing is then true when it asks on behalf of its kind, and the caller
// must call settle when it has its answer.
func (t *denyLeases) answer(ctx context.Context, key string) (res fsm.Result, ok, probing bool) {
	for {
		t.mu.Lock()
		l := t.byKind[key]
		switch {
		case l == nil:
			t.mu.Unlock()
			return fsm.Result{}, false, false
		case l.probe == nil && t.now().Before(l.until):
			res = leasedDenial(l.result, t.now().Sub(l.sentAt), t.rate)
			t.mu.Unlock()
			return res, true, false
		case l.probe == nil:
			l.probe = &probe{done: make(chan struct{})}
			t.mu.Unlock()
			return fsm.Result{}, false, true
		}
		p := l.probe
		l.waiting++
		joined := t.now()
		t.mu.Unlock()
		select {
		case <-p.done:
		case <-ctx.Done():
			t.mu.Lock()
			l.waiting--
			t.mu.Unlock()
			return fsm.Result{}, false, false
		}
		t.mu.Lock()
		l.waiting--
		now := t.now()
		t.mu.Unlock()
		if p.denial != nil && !joined.After(p.sentAt) {
			return probedDenial(*p.denial, now.Sub(p.sentAt)), true, false
		}
	}
}

// probedDenial is the answer a request that waited for a probe takes from
// the probe's denial, elapsed after the probe was sent: the same denial at
// the time the leader decided it, its waits shorter by elapsed (a retry at
// least a millisecond away).
func probedDenial(r fsm.Result, elapsed time.Duration) fsm.Result {
	out := shortenedWaits(r, elapsed)
	out.DenyForNanos = 0 // it starts no lease
	out.Leased = true
	return out
}

// settle takes what the leader answered request r of kind key that was
// sent at sentAt: a denial that says how long it holds becomes the kind's
// lease (taken reports that); anything else ends it. A probe's waiters then
// look again.
func (t *denyLeases) settle(key string, r *fsm.Request, sentAt time.Time, res *fsm.Result) (taken bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.byKind[key]
	if l != nil && l.probe != nil {
		l.probe.sentAt = sentAt
		if repeatableDenial(res) {
			denial := *res
			l.probe.denial = &denial
		}
		close(l.probe.done)
		l.probe = nil
	}
	now := t.now()
	lasts := t.lasts(res)
	if lasts <= 0 || !now.Before(sentAt.Add(lasts)) {
		// No lease, or one that ended before its answer came back. An
		// admission that took what was left hands the asking over to one
		// of the requests waiting, if the next unit comes later than an
		// answer takes (the next ask will likely bring a lease that
		// outlives its trip); anything else lets them all ask at once.
		handOver := l != nil && l.waiting > 0 && tookTheLast(res) && refillsAfter(res) > now.Sub(sentAt)
		if l != nil && !now.Before(l.until) && !handOver {
			delete(t.byKind, key)
			t.live.Add(-1)
		}
		return false
	}
	until := sentAt.Add(lasts)
	if l != nil && l.until.After(until) {
		return false // a longer lease, taken by a request sent later
	}
	if l == nil {
		if len(t.byKind) >= maxDenyLeases && !t.sweep() {
			return false
		}
		t.live.Add(1)
	}
	t.byKind[key] = &denyLease{until: until, sentAt: sentAt, result: *res, keys: leaseKeys(r, res)}
	return true
}

// leaseKeys are the keys the denial res of r counts on: each check's key
// as the leader decided it (a policy's template may have made it from
// dimensions). nil for an RLS query, whose limits' keys the node does not
// know: its lease ends with any raise.
func leaseKeys(r *fsm.Request, res *fsm.Result) []string {
	if r == nil || r.RLS != nil || len(res.Checks) != len(r.Checks) {
		return nil
	}
	keys := make([]string, len(r.Checks))
	for i := range r.Checks {
		keys[i] = cmp.Or(res.Checks[i].Key, r.Checks[i].Key)
	}
	return keys
}

// contradictedBy reports whether a raise of key (every key, when "") may
// contradict lease l.
func (l *denyLease) contradictedBy(key string) bool {
	return key == "" || l.keys == nil || slices.Contains(l.keys, key)
}

// tookTheLast reports whether res admitted its request with nothing left
// under one of its checks: the next request of its kind will likely be
// denied.
func tookTheLast(res *fsm.Result) bool {
	if !res.Allowed {
		return false
	}
	for i := range res.Checks {
		if res.Checks[i].Decision.Remaining == 0 {
			return true
		}
	}
	return false
}

// refillsAfter is how long after res until the checks that res left
// empty have a unit again.
func refillsAfter(res *fsm.Result) time.Duration {
	var d int64
	for i := range res.Checks {
		if c := &res.Checks[i].Decision; c.Remaining == 0 {
			d = max(d, c.RefillAfterNanos)
		}
	}
	return time.Duration(d)
}

// repeatableDenial reports whether res is a denial that holds for a while
// if only time passes (it says how long).
func repeatableDenial(res *fsm.Result) bool {
	return !res.Allowed && res.Rejection == nil && res.DenyForNanos > 0
}

// holdsAny reports whether the table may hold a lease, without locking: a
// node that holds none builds no key for a request.
func (t *denyLeases) holdsAny() bool { return t.live.Load() > 0 }

// sweep drops the leases that have ended and reports whether that made
// room.
func (t *denyLeases) sweep() bool {
	now := t.now()
	for key, l := range t.byKind {
		if l.probe == nil && !now.Before(l.until) {
			delete(t.byKind, key)
			t.live.Add(-1)
		}
	}
	return len(t.byKind) < maxDenyLeases
}

// lasts is how long, from when it was sent, a request answered with res may
// be answered so again: its denial's duration less what cluster time may
// run ahead of real time and the margin, at most the cap.
func (t *denyLeases) lasts(res *fsm.Result) time.Duration {
	if !repeatableDenial(res) || t.cap <= 0 {
		return 0
	}
	return min(holdtime.Lasts(res.DenyForNanos, t.rate), t.cap)
}

// clear drops every lease a raise of key (every key, when "") may
// contradict: a command that gives capacity back was applied. A probe under
// way keeps its place, so that its waiters hear its answer.
func (t *denyLeases) clear(raised string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, l := range t.byKind {
		switch {
		case !l.contradictedBy(raised):
		case l.probe == nil:
			delete(t.byKind, key)
			t.live.Add(-1)
		default:
			l.until = time.Time{}
		}
	}
}

// leasedDenial is the answer a lease gives elapsed after its request was
// sent: the same denial, its waits shorter by elapsed (a retry at least a
// millisecond away), at the latest cluster time it may be now: the time it
// counts from plus elapsed, and what cluster time may run ahead (rate).
func leasedDenial(r fsm.Result, elapsed time.Duration, rate float64) fsm.Result {
	out := shortenedWaits(r, elapsed)
	out.AtNanos = holdtime.LatestClusterTime(r.DenyAtNanos, elapsed, rate)
	out.DenyForNanos = holdtime.Shorten(r.DenyForNanos, elapsed)
	out.DenyAtNanos = out.AtNanos
	out.Leased = true
	return out
}

// shortenedWaits is r with its checks' waits shorter by elapsed (a retry
// at least a millisecond away), on a copy of its checks.
func shortenedWaits(r fsm.Result, elapsed time.Duration) fsm.Result {
	out := r
	out.Checks = make([]fsm.CheckResult, len(r.Checks))
	copy(out.Checks, r.Checks)
	for i := range out.Checks {
		d := &out.Checks[i].Decision
		d.ResetAfterNanos, d.RefillAfterNanos = holdtime.Shorten(d.ResetAfterNanos, elapsed), holdtime.Shorten(d.RefillAfterNanos, elapsed)
		if !d.Allowed {
			d.RetryAfterNanos = holdtime.RetryAfter(d.RetryAfterNanos, elapsed)
		}
	}
	return out
}

// decide answers what it can of reqs on this node, from its deny leases
// and its shares (shares.go), and asks the leader for the rest
// (decideOnLeader): with a share ask where a key is hot, taking a lease
// from every denial that says how long it holds. inline, when not nil, has
// the local_shares of each request's inline check. The leader named is ""
// when no request asked it.
func (n *Node) decide(ctx context.Context, reqs []fsm.Request, inline []*contract.LocalShares) ([]fsm.Result, string, error) {
	if err := n.refuseOutsideCluster(); err != nil {
		return nil, "", err
	}
	t := n.denyLeases
	out := make([]fsm.Result, len(reqs))
	var ask []fsm.Request
	var index []int
	var keys, shareKeys []string // of the requests asked: the kind, when looked up; the key of a share ask
	var probes []bool
	var answered []int // answered here, from a lease or a share
	leased, shared, changed := 0, 0, false
	for i := range reqs {
		r := &reqs[i]
		key, shareKey := "", ""
		probing := false
		if t != nil && leasable(r) && t.holdsAny() {
			key = denyLeaseKey(r)
			var ok bool
			if out[i], ok, probing = t.answer(ctx, key); ok {
				leased++
				answered = append(answered, i)
				continue
			}
		}
		if cfg := n.sharesOf(r, inlineSharesAt(inline, i)); cfg != nil && !probing {
			sk := requestKey(r)
			res, fromShare, shareAsk := n.takeShare(ctx, sk, r, cfg)
			if fromShare {
				out[i] = res
				shared++
				answered = append(answered, i)
				continue
			}
			if shareAsk != nil {
				withAsk := *r
				withAsk.Share = shareAsk
				r, shareKey, changed = &withAsk, sk, true
			}
		}
		ask, index, keys, shareKeys, probes = append(ask, *r), append(index, i), append(keys, key), append(shareKeys, shareKey), append(probes, probing)
	}
	if leased > 0 {
		n.metrics.leaseDenials.Add(float64(leased))
	}
	if shared > 0 {
		n.metrics.shareAnswers.Add(float64(shared))
	}
	if !n.cfg.NoStats {
		n.noteAnsweredHere(reqs, out, answered)
	}
	if len(ask) == 0 {
		return out, "", nil
	}
	if len(ask) == len(reqs) && !changed {
		ask = reqs // nothing answered here: no copy
	}
	sentAt := time.Now()
	results, leader, err := n.decideOnLeader(ctx, ask)
	if err == nil && !n.isLeader() {
		n.denied.note(ask, results) // the leader noted them itself
	}
	for j, i := range index {
		if shareKeys[j] != "" {
			var res *fsm.Result
			if err == nil {
				res = &results[j]
			}
			n.settleShare(shareKeys[j], sentAt, ask[j].Share, res)
			if res != nil {
				res.Share = nil // the node's own, not the caller's
			}
		}
		if err != nil {
			if probes[j] {
				t.settle(keys[j], &ask[j], sentAt, &fsm.Result{Allowed: true}) // let its waiters ask
			}
			continue
		}
		r := &results[j]
		out[i] = *r
		switch {
		case t == nil:
		case r.DenyForNanos > 0 && leasable(&ask[j]):
			if keys[j] == "" {
				keys[j] = denyLeaseKey(&ask[j])
			}
			if t.settle(keys[j], &ask[j], sentAt, r) {
				n.metrics.leasesTaken.Inc()
			}
		case probes[j]:
			t.settle(keys[j], &ask[j], sentAt, r)
		}
	}
	return out, leader, err
}

// inlineSharesAt is the i-th of inline, or nil.
func inlineSharesAt(inline []*contract.LocalShares, i int) *contract.LocalShares {
	if i < len(inline) {
		return inline[i]
	}
	return nil
}

// leaseGrants is what the leader knows of the deny leases it may have
// granted: the term it last granted one in, and when.
type leaseGrants struct {
	mu   sync.Mutex
	term uint64
	at   time.Time
}

// note records that results, decided in term, may have granted leases
// (a denial that says how long it holds, or a share).
func (g *leaseGrants) note(results []fsm.Result, term uint64) {
	for i := range results {
		if results[i].DenyForNanos > 0 || results[i].Share != nil {
			g.mu.Lock()
			g.term, g.at = term, time.Now()
			g.mu.Unlock()
			return
		}
	}
}

// raiseWait is how long a command that gives capacity back, applied by this
// leader in term, must wait before it is acknowledged: until the last lease
// this leader granted could have ended. Leases of an earlier term (this
// node's, or another leader's before it) are not known: the first raise of
// a term waits out a whole cap.
func (g *leaseGrants) raiseWait(term uint64, limit time.Duration) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.term != term {
		g.term, g.at = term, time.Now()
	}
	return limit - time.Since(g.at)
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
	wait := n.leaseGrants.raiseWait(n.raft.CurrentTerm(), max(n.cfg.DenyLeaseCap, contract.MaxShareTTL)+holdtime.Margin)
	if wait <= 0 {
		return
	}
	n.metrics.raiseWaits.Observe(wait.Seconds())
	select {
	case <-time.After(wait):
	case <-n.stopCh:
	}
}
