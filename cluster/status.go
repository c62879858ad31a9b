package cluster

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/contract"
)

// Status returns this node's view of the cluster, without asking the
// leader; it is cheap and always answers while the node runs.
func (n *Node) Status() contract.Status {
	_, leaderID := n.raft.LeaderWithID()
	st := contract.Status{
		SelfID:       n.cfg.ID,
		LeaderID:     string(leaderID),
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		Keys:         n.fsm.Stats().Keys,
	}
	st.LastSnapshotIndex, _ = strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	future := n.raft.GetConfiguration()
	if future.Error() == nil {
		for _, s := range future.Configuration().Servers {
			ms := contract.MemberStatus{
				Member: contract.Member{ID: string(s.ID), RaftAddr: string(s.Address), HTTPAddr: n.fsm.NodeHTTPAddr(string(s.ID))},
				Voter:  s.Suffrage == raft.Voter,
				Leader: s.ID == leaderID,
			}
			n.memberHealthOf(&ms, leaderID)
			st.Members = append(st.Members, ms)
		}
	}
	return st
}

// Ready reports whether the node is a member, knows a leader and has
// applied every entry it knows to be committed.
func (n *Node) Ready() bool {
	_, leaderID := n.raft.LeaderWithID()
	return leaderID != "" && n.isMember() && n.raft.AppliedIndex() >= n.raft.CommitIndex()
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
