package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/cluster/internal/consistency"
	"github.com/limitnode/limitnode/cluster/internal/health"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/transport"
)

// Status returns this node's view of the cluster, without asking the
// leader; it is cheap and always answers while the node runs.
func (n *Node) Status() contract.Status {
	_, leaderID := n.raft.LeaderWithID()
	state := n.fsm.Stats()
	st := contract.Status{
		SelfID:       n.cfg.ID,
		SelfRaftAddr: n.advertise,
		ClusterID:    n.ClusterID(),
		LeaderID:     string(leaderID),
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		Keys:         state.Keys,
		Leases:       state.Leases,
		LeaseWaiters: state.LeaseWaiters,
	}
	st.Blocked, st.BlockedByPenalty = n.fsm.BlockCount(n.clock.Estimate())
	st.LastSnapshotIndex, _ = strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	future := n.raft.GetConfiguration()
	if future.Error() == nil {
		for _, s := range future.Configuration().Servers {
			ms := contract.MemberStatus{
				Member: contract.Member{ID: string(s.ID), RaftAddr: string(s.Address), HTTPAddr: n.fsm.NodeHTTPAddr(string(s.ID))},
				Voter:  s.Suffrage == raft.Voter,
				Leader: s.ID == leaderID,
			}
			n.health.Fill(&ms, string(leaderID))
			st.Members = append(st.Members, ms)
		}
	}
	return st
}

// Ready returns "" when the node serves as a member: it is one, knows a
// leader, does not hold its calls as a lone voter just started
// (members.holding), has applied every entry it knows to be committed and, within
// maxReadyLag, what the leader had applied, can write to its disk and
// append to its log, and its Raft port accepts. Otherwise it says what is
// wrong.
func (n *Node) Ready() string {
	_, leaderID := n.raft.LeaderWithID()
	switch {
	case n.raft.State() == raft.Shutdown:
		return "raft is stopped"
	case n.members.isRemoved():
		return fmt.Sprintf("this node was removed from the cluster: %s at %s is not a member until it is joined again; %s", n.cfg.ID, n.advertise, removedAdvice)
	case !n.members.isMember():
		return "this node is not a member of the cluster (not joined yet)"
	case n.health.DivergedAt() != 0:
		return fmt.Sprintf("this node's state differs from the leader's at log index %d: restore it from a backup or remove its data directory and join it again", n.health.DivergedAt())
	case n.fsm.Damaged() != 0:
		return fmt.Sprintf("the log holds a damaged entry at index %d: this node's state may differ from the others'; restore it from a backup or remove its data directory and join it again", n.fsm.Damaged())
	case n.mux.Failed():
		return "the raft port no longer accepts connections"
	case n.members.foreignReason() != "":
		return n.members.foreignReason()
	case n.disk.Err() != nil:
		return "cannot write to the data directory: " + n.disk.Err().Error()
	case n.appends.Failing() != "":
		return n.appends.Failing()
	case leaderID == "":
		return n.quorum.NoLeaderReason()
	case n.members.holdReason() != "":
		return n.members.holdReason()
	case n.raft.AppliedIndex() < n.raft.CommitIndex():
		return "catching up with the log"
	case !n.IsLeader() && n.progress.Trailing(n.raft.AppliedIndex()) != "":
		return n.progress.Trailing(n.raft.AppliedIndex())
	}
	return ""
}

// Snapshot makes this node take a Raft snapshot now (and truncate its log),
// as it does on its own every SnapshotThreshold entries. Having nothing new
// to snapshot is not an error.
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("cluster: snapshot: %w", err)
	}
	return nil
}

// leaderHTTPAddr is the HTTP address f records for the leader r knows, or
// "".
func leaderHTTPAddr(r *raft.Raft, f *fsm.FSM) string {
	_, id := r.LeaderWithID()
	if id == "" {
		return ""
	}
	return f.NodeHTTPAddr(string(id))
}

// CheckConsistency appends a checkpoint on the leader (this node, or by
// forwarding) and waits until every member has taken its digest there (or
// ctx ends), then says which agree with the leader's. A member that did not
// answer in time is listed with Agrees nil.
func (n *Node) CheckConsistency(ctx context.Context) (contract.ConsistencyReport, error) {
	return onLeader(ctx, n.route, false, func(ctx context.Context) (contract.ConsistencyReport, error) {
		if n.IsLeader() {
			return checkConsistencyAsLeader(ctx, n.raft, n.cfg.ID, &n.digests, n.fwd.dialer, n.requestTimeout, n.replica.awaitApplied)
		}
		resp, err := n.route.forward(ctx, &forwardRequest{Op: opConsistency})
		if err != nil {
			return contract.ConsistencyReport{}, err
		}
		if resp.Consistency == nil {
			return contract.ConsistencyReport{}, errors.New("cluster: the leader answered a consistency check without its report")
		}
		return *resp.Consistency, nil
	})
}

// checkConsistencyAsLeader is consistency.Check on the leader selfID: its
// checkpoint appended through r, each other member asked for its latest
// digest over the forwarding protocol.
func checkConsistencyAsLeader(ctx context.Context, r *raft.Raft, selfID string, digests *consistency.Digests, dialer transport.Dialer, timeout time.Duration, await func(raft.ApplyFuture) error) (contract.ConsistencyReport, error) {
	pinger := newForwarder(dialer, health.Every)
	defer pinger.close()
	latestOf := func(ctx context.Context, addr string) (consistency.Checkpoint, error) {
		resp, err := pinger.send(ctx, addr, &forwardRequest{Op: opPing})
		if err != nil {
			return consistency.Checkpoint{}, err
		}
		return resp.Checkpoint, nil
	}
	servers := func() ([]raft.Server, error) { return configuration(r) }
	return consistency.Check(ctx, digests, selfID, servers, func() (uint64, error) { return appendCheckpoint(r, timeout, await) }, latestOf)
}

// appendCheckpoint appends a checkpoint through r, the leader's Raft, and
// returns its index once applied here (await waits for it).
func appendCheckpoint(r *raft.Raft, timeout time.Duration, await func(raft.ApplyFuture) error) (uint64, error) {
	data, err := fsm.Encode(fsm.CommandCheckpoint, &fsm.CheckpointCommand{})
	if err != nil {
		return 0, err
	}
	future := r.Apply(data, timeout)
	if err := await(future); err != nil {
		return 0, translate(err)
	}
	return future.Index(), nil
}
