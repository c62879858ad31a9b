package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/limitnode/limitnode/cluster/internal/denylease"
	"github.com/limitnode/limitnode/cluster/internal/fastdeny"
	"github.com/limitnode/limitnode/cluster/internal/groupcommit"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/transport"
)

// groupCommit is this node's way to the leader's log for decisions: the
// leader's group commit (one Raft entry for the requests that arrive
// while the pipeline is full), a follower's forwarding (one message to the
// leader for the same), and the denials the leader answers from its
// applied state without an entry (denyFast, below). It needs the node's
// replica and forwarder, nothing else of the node.
type groupCommit struct {
	id      string // this node's ID, named as the leader that decided
	replica *replica
	fwd     *forwarder
	// bounds are the per-entry bounds the leader writes into each allow
	// entry, so that every replica applies the same ones.
	bounds fsm.AllowCommand
	// leaderBatch gathers the leader's entries; followerBatch a
	// follower's forwards, and followerDenials what this follower's
	// replica denies, so that those do not wait behind requests that need
	// an entry.
	leaderBatch, followerBatch, followerDenials *groupcommit.Batcher
	// forwardedLimit bounds what the leader accepts in one forwarded
	// message: generous, so that a follower configured with larger entries
	// is still served, and bounded, so that one message cannot become an
	// entry that stalls the cluster.
	forwardedLimit groupcommit.Load

	fastDenials bool              // Config.NoFastDenials unset
	leaseGrants *denylease.Grants // what the leader knows of the leases it granted
	denied      fastdeny.Recent   // the kinds of request denied lately
	toLog       fastdeny.Queued   // requests on their way to the log, by key
	stats       *recorder         // the decisions' statistics, nil when off
	metrics     *nodeMetrics
}

// newGroupCommit starts the batchers of a node whose configuration is cfg
// (with its defaults).
func newGroupCommit(cfg Config, r *replica, fwd *forwarder, leaseGrants *denylease.Grants, stats *recorder, metrics *nodeMetrics) *groupCommit {
	g := &groupCommit{
		id: cfg.ID, replica: r, fwd: fwd, leaseGrants: leaseGrants, metrics: metrics,
		bounds: fsm.AllowCommand{MaxKeys: max(cfg.MaxKeys, 0), KeyLimitFailOpen: cfg.KeyLimitFailOpen,
			MaxIDsPerCaller: max(cfg.MaxRequestIDsPerCaller, 0)},
		forwardedLimit: groupcommit.Load{Requests: 4 * cfg.MaxBatchRequests, Checks: 4 * cfg.MaxBatchChecks, Bytes: transport.MaxFrameBytes},
		fastDenials:    !cfg.NoFastDenials,
	}
	if !cfg.NoStats {
		g.stats = stats
	}
	limit := groupcommit.Load{Requests: cfg.MaxBatchRequests, Checks: cfg.MaxBatchChecks, Bytes: maxFlushBytes}
	g.leaderBatch = groupcommit.New(g.applyBatch, limit, cfg.MaxEntriesInFlight, groupcommit.GatherYields, metrics.batcher("leader"))
	g.followerBatch = groupcommit.New(g.forwardBatch, limit, cfg.MaxForwardsInFlight, groupcommit.GatherYields, metrics.batcher("follower"))
	g.followerDenials = groupcommit.New(g.forwardBatch, limit, cfg.MaxForwardsInFlight, groupcommit.GatherYields, metrics.batcher("follower-denials"))
	return g
}

// stop fails what waits in the batchers and waits for their flushes.
func (g *groupCommit) stop() {
	g.leaderBatch.Stop()
	g.followerBatch.Stop()
	g.followerDenials.Stop()
}

// decideOnLeader sends requests through the leader's group commit, locally
// or by forwarding, and retries only where nothing can have been applied;
// onLeader refuses them on a node outside its cluster.
func (n *Node) decideOnLeader(ctx context.Context, reqs []fsm.Request) ([]fsm.Result, string, error) {
	type decided struct {
		results []fsm.Result
		leader  string
	}
	d, err := onLeader(ctx, n.route, false, func(ctx context.Context) (decided, error) {
		results, leader, err := n.commit.attempt(ctx, reqs)
		return decided{results, leader}, err
	})
	return d.results, d.leader, err
}

// attempt sends requests once: to this node's fast denials and group
// commit when it leads, else to the leader.
func (g *groupCommit) attempt(ctx context.Context, reqs []fsm.Request) ([]fsm.Result, string, error) {
	if g.replica.isLeader() {
		if results, ok := g.denyFast(ctx, reqs); ok {
			return results, g.id, nil
		}
		return g.submitToLog(ctx, reqs)
	}
	b := g.followerBatch
	if g.likelyDenied(reqs) {
		b = g.followerDenials
	}
	return b.Submit(ctx, reqs)
}

// applyBatch is the leader's flush: one Raft entry for all the calls. It
// holds the leader's pipeline until the entry is applied, so that what
// arrives meanwhile goes into the next entry together (Config.MaxEntriesInFlight).
func (g *groupCommit) applyBatch(calls []*groupcommit.Call) {
	reqs := groupcommit.Requests(calls)
	stamp, err := g.replica.leaderStamp()
	if err != nil {
		groupcommit.FailAll(calls, err) // nothing of the batch was appended
		return
	}
	entry := g.bounds
	entry.NowNanos, entry.Requests = stamp, reqs
	data, err := fsm.Encode(fsm.CommandAllow, &entry)
	if err != nil {
		groupcommit.FailAll(calls, err)
		return
	}
	start := time.Now()
	future := g.replica.raft.Apply(data, g.replica.timeout)
	if err := g.replica.awaitApplied(future); err != nil {
		if notApplied(err) {
			groupcommit.FailAll(calls, errNotLeader)
		} else {
			failAmbiguous(calls, err)
		}
		return
	}
	since(g.metrics.commit, start)
	switch resp := future.Response().(type) {
	case *fsm.Response:
		g.denied.Note(reqs, resp.Results)
		groupcommit.Distribute(calls, resp.Results, g.id)
	case error:
		groupcommit.FailAll(calls, fmt.Errorf("cluster: apply: %w", resp))
	default:
		groupcommit.FailAll(calls, fmt.Errorf("cluster: apply returned %T", resp))
	}
}

// forwardBatch is a follower's flush: one message to the leader for all the
// calls.
func (g *groupCommit) forwardBatch(calls []*groupcommit.Call) {
	addr, id := g.replica.raft.LeaderWithID()
	if addr == "" || string(id) == g.id {
		groupcommit.FailAll(calls, errNotLeader)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.replica.timeout)
	defer cancel()
	start := time.Now()
	resp, err := g.fwd.send(ctx, string(addr), &forwardRequest{Op: opAllow, Requests: groupcommit.Requests(calls)})
	since(g.metrics.forward, start)
	switch {
	case errors.Is(err, transport.ErrNotSent):
		groupcommit.FailAll(calls, errNotLeader)
	case err != nil:
		failAmbiguous(calls, err)
	case resp.Status == statusUnknown:
		failAmbiguous(calls, errorFor(resp))
	case resp.Status != statusOK:
		groupcommit.FailAll(calls, errorFor(resp))
	default:
		groupcommit.Distribute(calls, resp.Results, string(id))
	}
}

// decideForwarded decides the requests a follower forwarded, on the
// leader: a fast denial, or through the log; a request that is invalid as
// it stands is refused on its own.
func (g *groupCommit) decideForwarded(ctx context.Context, reqs []fsm.Request) *forwardResponse {
	defer since(g.metrics.forwardServe, time.Now())
	if !g.replica.isLeader() {
		return &forwardResponse{Status: statusNotLeader}
	}
	if l := groupcommit.LoadOf(reqs); !l.Within(g.forwardedLimit) {
		return replyTo(contract.Invalid("requests", "a forwarded message of %d requests and %d checks is over this leader's limit", l.Requests, l.Checks))
	}
	refused, valid, index := refuseInvalid(reqs)
	if len(valid) == 0 {
		return &forwardResponse{Results: refused}
	}
	decided, ok := g.denyFast(ctx, valid)
	if !ok {
		var err error
		if decided, _, err = g.submitToLog(ctx, valid); err != nil {
			return replyTo(err)
		}
	}
	if refused == nil {
		return &forwardResponse{Results: decided}
	}
	for j, i := range index {
		refused[i] = decided[j]
	}
	return &forwardResponse{Results: refused}
}

// failAmbiguous answers calls whose outcome is unknown. A call whose every
// request carries an ID is safe to send again, since the FSM answers a
// repeated ID with its first result; the others get contract.ErrOutcomeUnknown.
func failAmbiguous(calls []*groupcommit.Call, cause error) {
	for _, c := range calls {
		c.Err = fmt.Errorf("%w: %w", contract.ErrOutcomeUnknown, cause)
		if allHaveIDs(c.Requests) {
			c.Err = errNotLeader
		}
	}
}

func allHaveIDs(reqs []fsm.Request) bool {
	for _, r := range reqs {
		if r.RequestID == "" {
			return false
		}
	}
	return true
}

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
	if !g.fastDenials || r.barrierTerm.Load() != term || !r.isLeader() || !g.denied.AnyRecent(reqs) {
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
	g.denied.Note(reqs, results)
	if g.stats != nil {
		g.stats.record(&fsm.AllowCommand{NowNanos: results[0].AtNanos, Requests: reqs}, &fsm.Response{Results: results})
	}
	return results, true
}

// likelyDenied reports whether this node's replica denies every request of
// reqs now: on a follower, a guess that sends them to the leader apart from
// requests that will need an entry.
func (g *groupCommit) likelyDenied(reqs []fsm.Request) bool {
	if !g.fastDenials || !g.denied.AnyRecent(reqs) {
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
		r, ok := g.replica.fsm.DenyNow(&reqs[i], now, func() bool { return g.toLog.Has(&reqs[i]) })
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

// submitToLog sends requests the fast path did not deny to the leader's
// group commit, counting their keys as queued meanwhile.
func (g *groupCommit) submitToLog(ctx context.Context, reqs []fsm.Request) ([]fsm.Result, string, error) {
	if g.fastDenials { // only the fast path reads the count
		g.toLog.Add(reqs, 1)
		defer g.toLog.Add(reqs, -1)
	}
	return g.leaderBatch.Submit(ctx, reqs)
}
