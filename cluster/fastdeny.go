package cluster

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/limitnode/limitnode/fsm"
)

// Denials without consensus. A denial consumes nothing, so the leader may
// answer it from its applied state instead of appending an entry, provided
// the answer is linearizable: the state it reads must hold every entry
// committed before the request arrived, and the node must still have been
// the leader after the request arrived (else a newer leader may have
// admitted what this state does not show). That is Raft's ReadIndex: note
// the commit index, confirm leadership with a round of heartbeats
// (VerifyLeader: no fsync, no entry), wait until the index is applied, then
// read. The requests that arrive while one confirmation is under way share
// the next (confirmer), as requests share an entry in group commit.
//
// This runs beside group commit, not in it: a denial does not wait for the
// fsync of an entry that admits others. Followers forward the requests
// their own replica denies through a batcher of their own
// (followerDenials), for the same reason; the leader decides either way.

// fastDenyWait bounds how long a request waits for the applied index to
// reach its read index before it goes through the log instead.
const fastDenyWait = 100 * time.Millisecond

// denyFast answers reqs with denials when the leader's applied state denies
// every one of them, linearizably; ok is false when the requests must go
// through the log (one is admitted, this node cannot confirm it leads, or
// the fast path is off).
func (g *groupCommit) denyFast(ctx context.Context, reqs []fsm.Request) (results []fsm.Result, ok bool) {
	r := g.replica
	term := r.raft.CurrentTerm()
	// Until this leader has applied an entry of its own term (leaderStamp's
	// barrier), its commit index may trail what earlier leaders committed.
	if !g.fastDenials || r.barrierTerm.Load() != term || !r.isLeader() || !g.denied.anyRecent(reqs) {
		return nil, false
	}
	// A first look, before any round trip: most requests are admitted.
	if _, ok := g.deniedNow(reqs, r.stampIn(term)); !ok {
		return nil, false
	}
	// From before its reading of the state to when it notes what it
	// granted, the decision counts for a raise as granting now.
	g.leaseGrants.Deciding()
	decided := []fsm.Result(nil)
	defer func() { g.leaseGrants.Decided(decided, term) }()
	readIndex := r.raft.CommitIndex()
	if err := r.confirm.leadership(ctx); err != nil || r.raft.CurrentTerm() != term {
		return nil, false
	}
	for deadline := time.Now().Add(fastDenyWait); !r.hasApplied(readIndex); time.Sleep(20 * time.Microsecond) {
		if time.Now().After(deadline) {
			return nil, false
		}
	}
	if results, ok = g.deniedNow(reqs, r.stampIn(term)); !ok {
		return nil, false
	}
	g.metrics.fastDenials.Add(float64(len(results)))
	decided = results
	g.denied.note(reqs, results)
	if g.stats != nil {
		g.stats.record(&fsm.AllowCommand{NowNanos: results[0].AtNanos, Requests: reqs}, &fsm.Response{Results: results})
	}
	return results, true
}

// likelyDenied reports whether this node's replica denies every request of
// reqs now: on a follower, a guess that sends them to the leader apart from
// requests that will need an entry.
func (g *groupCommit) likelyDenied(reqs []fsm.Request) bool {
	if !g.fastDenials || !g.denied.anyRecent(reqs) {
		return false
	}
	_, ok := g.deniedNow(reqs, time.Now().UnixNano())
	return ok
}

// deniedNow returns the denials of reqs when every one is denied on the
// applied state (see fsm.DenyNow; queued is whether requests on the same
// keys are on their way to this leader's log).
func (g *groupCommit) deniedNow(reqs []fsm.Request, now int64) ([]fsm.Result, bool) {
	var results []fsm.Result // most first looks find an admission: allocate after a denial
	for i := range reqs {
		r, ok := g.replica.fsm.DenyNow(&reqs[i], now, func() bool { return g.toLog.has(&reqs[i]) })
		if !ok {
			return nil, false
		}
		if results == nil {
			results = make([]fsm.Result, len(reqs))
		}
		results[i] = r
	}
	return results, true
}

// recentDenials remembers what this node saw denied or spent to the last
// unit lately (each check's key and limit, or each descriptor of an Envoy
// query), so that the first look of the fast path, which costs about what
// deciding does, is spent only on requests that may be denied: under a load
// that is never over its limits, no request pays for it.
type recentDenials struct {
	mu sync.Mutex
	at map[string]time.Time
}

// Bounds of recentDenials: what "lately" is, and how many parts it keeps
// (past that, it forgets the oldest, and those requests go to the log
// until they are denied again).
const (
	recentDenialWindow = 2 * time.Second
	maxRecentDenials   = 1 << 16
)

// note records the parts of the requests that results deny, or admit with
// nothing left under a check (the next request will likely be denied).
func (r *recentDenials) note(reqs []fsm.Request, results []fsm.Result) {
	var now time.Time
	for i := range results {
		res := &results[i]
		if res.Rejection != nil || i >= len(reqs) || (res.Allowed && !res.TookTheLast()) {
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		r.mu.Lock()
		if r.at == nil {
			r.at = make(map[string]time.Time)
		}
		for _, part := range requestParts(&reqs[i]) {
			if len(r.at) >= maxRecentDenials {
				r.forgetOld(now)
			}
			r.at[part] = now
		}
		r.mu.Unlock()
	}
}

// forgetOld drops the parts not seen within the window, or half of them
// when all are recent.
func (r *recentDenials) forgetOld(now time.Time) {
	for key, at := range r.at {
		if now.Sub(at) > recentDenialWindow || len(r.at) >= maxRecentDenials/2 {
			delete(r.at, key)
		}
	}
}

// anyRecent reports whether a request of reqs has a part seen lately.
func (r *recentDenials) anyRecent(reqs []fsm.Request) bool {
	r.mu.Lock()
	empty := len(r.at) == 0
	r.mu.Unlock()
	if empty {
		return false
	}
	var parts []string
	for i := range reqs {
		parts = append(parts, requestParts(&reqs[i])...)
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, part := range parts {
		if at, ok := r.at[part]; ok && now.Sub(at) <= recentDenialWindow {
			return true
		}
	}
	return false
}

// requestParts names what each check of a request counts on (its policy,
// key, inline limit and dimensions), or each descriptor of its query.
func requestParts(r *fsm.Request) []string {
	var out []string
	if q := r.RLS; q != nil {
		for _, d := range q.Descriptors {
			var b strings.Builder
			b.WriteString("rls\x00" + q.Domain)
			for _, e := range d.Entries {
				b.WriteString("\x00" + e.Key + "=" + e.Value)
			}
			out = append(out, b.String())
		}
		return out
	}
	for _, c := range r.Checks {
		out = append(out, c.CountsOn())
	}
	return out
}

// submitToLog sends requests the fast path did not deny to the leader's
// group commit, counting their keys as queued meanwhile.
func (g *groupCommit) submitToLog(ctx context.Context, reqs []fsm.Request) ([]fsm.Result, string, error) {
	if g.fastDenials { // only the fast path reads the count
		g.toLog.add(reqs, 1)
		defer g.toLog.add(reqs, -1)
	}
	return g.leaderBatch.Submit(ctx, reqs)
}

// queuedKeys counts the requests on their way to the log by key. When a
// token refills, every request that sees it would otherwise go to the log,
// where one takes it and the rest are denied an entry later; with the
// count, the first goes and the others are denied at the applied time
// meanwhile (fsm.DenyNow's queued), still linearizably.
type queuedKeys struct {
	mu sync.Mutex
	n  map[string]int
}

func (q *queuedKeys) add(reqs []fsm.Request, delta int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == nil {
		q.n = make(map[string]int)
	}
	for i := range reqs {
		k := reqs[i].CountsOn()
		if q.n[k] += delta; q.n[k] <= 0 {
			delete(q.n, k)
		}
	}
}

func (q *queuedKeys) has(r *fsm.Request) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n[r.CountsOn()] > 0
}

// confirmer shares rounds of leadership confirmation among the requests
// that wait for one: a request waits for a round that starts after it
// asked, so the leadership it confirms is leadership after the request
// arrived.
type confirmer struct {
	verify  func() error
	mu      sync.Mutex
	waiting []chan error
	running bool
}

// leadership returns nil once a round started after the call has
// confirmed that this node leads.
func (c *confirmer) leadership(ctx context.Context) error {
	done := make(chan error, 1)
	c.mu.Lock()
	c.waiting = append(c.waiting, done)
	if !c.running {
		c.running = true
		go c.rounds()
	}
	c.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rounds confirms for everyone waiting, round after round, until no one
// is.
func (c *confirmer) rounds() {
	for {
		c.mu.Lock()
		round := c.waiting
		c.waiting = nil
		if len(round) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		err := c.verify()
		for _, done := range round {
			done <- err
		}
	}
}
