package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/contract"
)

// Reads without a log entry. A read of the replicated state (policies,
// keys, blocks, the audit trail, RLS domains, a backup) must see every
// write acknowledged before it began, on whichever node it arrives. That
// is Raft's ReadIndex (section 6.4 of Ongaro's thesis), as the fast
// denials use it (fastdeny.go): the leader notes its commit index, confirms
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
func (n *Node) catchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(n.requestTimeout, readTimeout))
	defer cancel()
	defer since(n.metrics.readIndex, time.Now())
	index, err := n.readIndex(ctx)
	if err != nil {
		return err
	}
	return n.waitApplied(ctx, index)
}

// readIndex returns the leader's read index, from the leader itself or by
// asking it, retrying while the leader changes.
func (n *Node) readIndex(ctx context.Context) (uint64, error) {
	return onLeader(ctx, n, true, func(ctx context.Context) (uint64, error) {
		if n.isLeader() {
			return n.leaderReadIndex(ctx)
		}
		resp, err := n.forwardToLeader(ctx, &forwardRequest{Op: opReadIndex})
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
func (n *Node) leaderReadIndex(ctx context.Context) (uint64, error) {
	term := n.raft.CurrentTerm()
	if !n.isLeader() {
		return 0, errNotLeader
	}
	// Until a leader has applied an entry of its own term, its commit
	// index may trail what earlier leaders committed.
	if err := n.termBarrier(term); err != nil {
		return 0, err
	}
	index := n.raft.CommitIndex()
	if err := n.confirm.leadership(ctx); err != nil {
		if n.stopped() {
			return 0, contract.ErrShutdown
		}
		return 0, errNotLeader
	}
	if n.raft.CurrentTerm() != term {
		return 0, errNotLeader
	}
	return index, nil
}

// stopped reports whether the node is closing.
func (n *Node) stopped() bool {
	select {
	case <-n.stopCh:
		return true
	default:
		return false
	}
}

// waitApplied returns once this node's state machine holds every entry up
// to index, or an error wrapping contract.ErrNoLeader when ctx ends first.
// It polls from 50 µs up to 5 ms: a read arriving on a busy node usually
// finds its index applied within an entry's apply.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	for wait := 50 * time.Microsecond; n.raft.AppliedIndex() < index || !n.fsmCaughtUp(index); wait = min(2*wait, 5*time.Millisecond) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: this node did not apply the leader's read index %d in time", contract.ErrNoLeader, index)
		case <-n.stopCh:
			return contract.ErrShutdown
		case <-time.After(wait):
		}
	}
	return nil
}

// fsmCaughtUp reports whether the FSM has applied every entry up to index
// that Raft hands it (commands and configurations; it never sees barriers
// and no-ops). Raft's AppliedIndex counts an entry once it is handed over,
// before the FSM has applied it, so a read that waited for AppliedIndex
// alone could still see the state before the entry.
func (n *Node) fsmCaughtUp(index uint64) bool {
	if n.fsm.LastIndex() >= index {
		return true
	}
	snapshot, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	for i := max(n.fsm.LastIndex(), snapshot) + 1; i <= index; i++ {
		var l raft.Log
		if err := n.logStore.GetLog(i, &l); err != nil {
			return false
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return false
		}
	}
	return true
}
