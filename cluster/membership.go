package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/fsm"
)

// Join adds m to the cluster as a voter, or updates it if a member with the
// same ID and Raft address is already there (so a retried join is harmless).
// A member with the same ID at another address, or another ID at the same
// address, is removed first: that is a node that was rebuilt. Any member may
// be asked; a follower passes the request to the leader.
func (n *Node) Join(ctx context.Context, m Member) error {
	if m.ID == "" || m.RaftAddr == "" {
		return fmt.Errorf("%w: a member needs an ID and a Raft address", ErrInvalid)
	}
	return n.leaderOp(ctx, &forwardRequest{Op: opJoin, Member: m}, func() error { return n.joinAsLeader(m) })
}

// RemoveMember removes the member with the given ID from the cluster.
// Removing the leader itself is allowed: it steps down once the change is
// committed. It returns ErrNotFound if there is no such member.
func (n *Node) RemoveMember(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: a member ID is required", ErrInvalid)
	}
	return n.leaderOp(ctx, &forwardRequest{Op: opRemove, Member: Member{ID: id}}, func() error { return n.removeAsLeader(id) })
}

// leaderOp runs an operation that returns only an error on the leader; see
// leaderCall.
func (n *Node) leaderOp(ctx context.Context, forward *forwardRequest, local func() error) error {
	_, err := n.leaderCall(ctx, forward, func() (*fsm.LeaseResult, error) { return nil, local() })
	return err
}

// leaderCall runs an operation on the leader: here if this node leads,
// otherwise by forwarding it, retrying while no leader is known. The
// operations that go through it (membership, policies, leases by ID) are
// idempotent, so unlike Allow they may be retried after an unknown outcome.
func (n *Node) leaderCall(ctx context.Context, forward *forwardRequest, local func() (*fsm.LeaseResult, error)) (*fsm.LeaseResult, error) {
	ctx, cancel := n.withDeadline(ctx)
	defer cancel()
	backoff := 10 * time.Millisecond
	for {
		var result *fsm.LeaseResult
		var err error
		if n.isLeader() {
			result, err = local()
		} else if addr, id := n.raft.LeaderWithID(); addr == "" || string(id) == n.cfg.ID {
			err = errNotLeader
		} else {
			var resp *forwardResponse
			resp, err = n.fwd.send(ctx, string(addr), forward)
			if errors.Is(err, errNotSent) {
				err = errNotLeader
			} else if err == nil {
				result, err = resp.Lease, errorFor(resp)
			}
		}
		if !errors.Is(err, errNotLeader) && !errors.Is(err, ErrOutcomeUnknown) {
			return result, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrNoLeader, err)
		case <-n.stopCh:
			return nil, ErrShutdown
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

func (n *Node) joinAsLeader(m Member) error {
	future := n.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return translate(err)
	}
	present := false
	for _, s := range future.Configuration().Servers {
		sameID, sameAddr := string(s.ID) == m.ID, string(s.Address) == m.RaftAddr
		switch {
		case sameID && sameAddr:
			present = true
		case sameID || sameAddr:
			n.logger.Info("removing a member before it rejoins", "id", s.ID, "raft_addr", s.Address)
			if err := n.raft.RemoveServer(s.ID, 0, 0).Error(); err != nil {
				return translate(err)
			}
		}
	}
	if !present {
		if err := n.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr), 0, 0).Error(); err != nil {
			return translate(err)
		}
		n.logger.Info("member joined", "id", m.ID, "raft_addr", m.RaftAddr, "http_addr", m.HTTPAddr)
	}
	if n.fsm.NodeHTTPAddr(m.ID) == m.HTTPAddr {
		return nil
	}
	return n.applyCommand(fsm.CommandSetNode, &fsm.NodeCommand{ID: m.ID, HTTPAddr: m.HTTPAddr})
}

func (n *Node) removeAsLeader(id string) error {
	future := n.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return translate(err)
	}
	found := false
	for _, s := range future.Configuration().Servers {
		found = found || string(s.ID) == id
	}
	if !found {
		return &RejectedError{Field: "id", Message: fmt.Sprintf("no member %q", id), cause: ErrNotFound}
	}
	// Forget the address first: once the leader removes itself it can no
	// longer append anything.
	if err := n.applyCommand(fsm.CommandRemoveNode, &fsm.NodeCommand{ID: id}); err != nil {
		return err
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, 0).Error(); err != nil {
		return translate(err)
	}
	n.logger.Info("member removed", "id", id)
	return nil
}

// applyCommand appends one command (not an allow batch) on the leader and
// returns its outcome: nil, a *RejectedError, or a translated Raft error.
func (n *Node) applyCommand(t fsm.CommandType, body any) error {
	_, err := n.applyCommandResult(t, body)
	return err
}

// applyCommandResult is applyCommand for commands that answer with a value
// (a *fsm.LeaseResult).
func (n *Node) applyCommandResult(t fsm.CommandType, body any) (any, error) {
	data, err := fsm.Encode(t, body)
	if err != nil {
		return nil, err
	}
	future := n.raft.Apply(data, n.requestTimeout)
	if err := future.Error(); err != nil {
		return nil, translate(err)
	}
	switch resp := future.Response().(type) {
	case nil:
		return nil, nil
	case *fsm.Rejection:
		return nil, rejected(resp)
	case *fsm.LeaseResult:
		if resp.Rejection != nil {
			return nil, rejected(resp.Rejection)
		}
		return resp, nil
	case error:
		return nil, fmt.Errorf("cluster: apply: %w", resp)
	default:
		return nil, fmt.Errorf("cluster: apply returned %T", resp)
	}
}

// translate maps Raft's errors to this package's.
func translate(err error) error {
	switch {
	case notApplied(err):
		return errNotLeader
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	default:
		return fmt.Errorf("cluster: raft: %w", err)
	}
}

// MemberStatus is one member as this node sees it.
type MemberStatus struct {
	Member
	Voter  bool
	Leader bool
}

// Status is this node's view of the cluster.
type Status struct {
	// SelfID is this node's ID.
	SelfID string
	// LeaderID is the leader's ID, or "" while none is known.
	LeaderID     string
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	Members      []MemberStatus
	// LastSnapshotIndex is the log index of this node's latest snapshot
	// (0 when it has none).
	LastSnapshotIndex uint64
	// Keys is the number of (key, limit) pairs with live state.
	Keys int
}

// Status returns this node's view of the cluster, without asking the
// leader; it is cheap and always answers while the node runs.
func (n *Node) Status() Status {
	_, leaderID := n.raft.LeaderWithID()
	st := Status{
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
			st.Members = append(st.Members, MemberStatus{
				Member: Member{ID: string(s.ID), RaftAddr: string(s.Address), HTTPAddr: n.fsm.NodeHTTPAddr(string(s.ID))},
				Voter:  s.Suffrage == raft.Voter,
				Leader: s.ID == leaderID,
			})
		}
	}
	return st
}

// Ready reports whether the node knows a leader and has applied every entry
// it knows to be committed.
func (n *Node) Ready() bool {
	_, leaderID := n.raft.LeaderWithID()
	return leaderID != "" && n.raft.AppliedIndex() >= n.raft.CommitIndex()
}

// LeaderHTTPAddr returns the HTTP address of the current leader, or "" when
// no leader is known or its address is not recorded yet.
func (n *Node) LeaderHTTPAddr() string {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return ""
	}
	return n.fsm.NodeHTTPAddr(string(id))
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

// StateDigest returns the index of the last log entry this node applied and
// a digest of its replicated state: replicas at the same index must have the
// same digest.
func (n *Node) StateDigest() (uint64, [32]byte) { return n.fsm.Digest() }

// IsLeader reports whether this node currently believes it is the leader.
func (n *Node) IsLeader() bool { return n.isLeader() }
