package cluster

import (
	"context"
	"time"

	"github.com/limitnode/limitnode/contract"
)

// Reads without a log entry. A read of the replicated state (policies,
// keys, blocks, the audit trail, RLS domains, a backup) must see every
// write acknowledged before it began, on whichever node it arrives. That
// is Raft's ReadIndex (section 6.4 of Ongaro's thesis), as the fast
// denials use it (groupCommit.denyFast): the leader notes its commit index, confirms
// with a round of heartbeats that it still leads (VerifyLeader: no entry,
// no fsync; the reads waiting meanwhile share the next round), and the
// reading node waits until it has applied that index. A follower asks the
// leader for the index over the forwarding protocol (opReadIndex) and waits
// for its own replica. A node that cannot get an index (no leader, or a
// leader that can no longer reach a quorum, such as one deposed by a
// partition) answers with an error, never with its own possibly stale
// state.

// readTimeout bounds how long a read waits for a read index and for this
// node's replica to reach it.
const readTimeout = 2 * time.Second

// catchUp waits until this node has applied every write acknowledged
// before it was called. Its errors wrap contract.ErrNoLeader (no leader
// could confirm an index in time, or this node did not reach it) or are
// contract.ErrShutdown.
func (rt *leaderRoute) catchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(rt.replica.timeout, readTimeout))
	defer cancel()
	defer since(rt.readWait, time.Now())
	index, err := rt.readIndex(ctx)
	if err != nil {
		return err
	}
	return rt.replica.waitApplied(ctx, index)
}

// readIndex returns the leader's read index, from the leader itself or by
// asking it, retrying while the leader changes.
func (rt *leaderRoute) readIndex(ctx context.Context) (uint64, error) {
	return onLeader(ctx, rt, true, func(ctx context.Context) (uint64, error) {
		if rt.replica.isLeader() {
			return rt.replica.leaderReadIndex(ctx)
		}
		resp, err := rt.forward(ctx, &forwardRequest{Op: opReadIndex})
		if err != nil {
			return 0, err
		}
		return resp.AppliedIndex, nil
	})
}

// leaderReadIndex is this leader's commit index, once a heartbeat round
// begun after the call confirmed that it still leads. Its errors are
// errNotLeader (it does not lead, or could not confirm it) and
// contract.ErrShutdown.
func (r *replica) leaderReadIndex(ctx context.Context) (uint64, error) {
	term := r.raft.CurrentTerm()
	if !r.isLeader() {
		return 0, errNotLeader
	}
	// Until a leader has applied an entry of its own term, its commit
	// index may trail what earlier leaders committed.
	if err := r.termBarrier(term); err != nil {
		return 0, err
	}
	index := r.raft.CommitIndex()
	if err := r.confirm.leadership(ctx); err != nil {
		if r.stopped() {
			return 0, contract.ErrShutdown
		}
		return 0, errNotLeader
	}
	if r.raft.CurrentTerm() != term {
		return 0, errNotLeader
	}
	return index, nil
}
