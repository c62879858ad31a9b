package cluster

import (
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
// (VerifyLeader: no fsync, no entry), wait until the index is applied,
// then read. One confirmation serves every call of a flush, as one entry
// serves them in group commit. Calls whose every request the state denies
// are answered here; the rest go through the log as before.

// fastDenyWait bounds how long a flush waits for the applied index to
// reach the read index before it sends its calls through the log instead.
const fastDenyWait = 100 * time.Millisecond

// denyFast answers the calls whose every request is denied on the applied
// state and returns the others, for the log.
func (n *Node) denyFast(calls []*call) []*call {
	term := n.raft.CurrentTerm()
	// Until this leader has applied an entry of its own term (leaderStamp's
	// barrier), its commit index may trail what earlier leaders committed.
	if n.cfg.NoFastDenials || n.barrierTerm.Load() != term {
		return calls
	}
	clock := func() int64 {
		last := n.fsm.Now()
		return fsm.ClampStamp(n.clock.stamp(term, last), last)
	}
	// A first look, before any round trip: most flushes deny nothing.
	if !n.anyDenied(calls, clock()) {
		return calls
	}
	readIndex := n.raft.CommitIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil || n.raft.CurrentTerm() != term {
		return calls // the log path answers them (errNotLeader, or a retry)
	}
	for deadline := time.Now().Add(fastDenyWait); n.fsm.LastIndex() < readIndex; time.Sleep(20 * time.Microsecond) {
		if time.Now().After(deadline) {
			return calls
		}
	}
	now := clock()
	rest := calls[:0:0]
	for _, c := range calls {
		results, ok := n.deniedNow(c.requests, now)
		if !ok {
			rest = append(rest, c)
			continue
		}
		c.results, c.leader = results, n.cfg.ID
		c.finish()
		n.metrics.fastDenials.Add(float64(len(results)))
		if !n.cfg.NoStats {
			n.stats.record(&fsm.AllowCommand{NowNanos: results[0].AtNanos, Requests: c.requests}, &fsm.Response{Results: results})
		}
	}
	return rest
}

// anyDenied reports whether some call's every request is denied now.
func (n *Node) anyDenied(calls []*call, now int64) bool {
	for _, c := range calls {
		if _, ok := n.deniedNow(c.requests, now); ok {
			return true
		}
	}
	return false
}

// deniedNow returns the denials of reqs when every one is denied on the
// applied state (see fsm.DenyNow).
func (n *Node) deniedNow(reqs []fsm.Request, now int64) ([]fsm.Result, bool) {
	results := make([]fsm.Result, len(reqs))
	for i := range reqs {
		r, ok := n.fsm.DenyNow(&reqs[i], now)
		if !ok {
			return nil, false
		}
		results[i] = r
	}
	return results, true
}
