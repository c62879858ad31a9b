package cluster

import (
	"errors"

	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// Replicas that apply the same log hold the same state; a bad disk, a bug
// or a forged entry can break that silently. As etcd does, the leader
// appends a checkpoint every ConsistencyCheckEvery (and on demand): every
// replica takes the digest of its state at that index, and the leader's
// health round compares each member's digest with its own. A member that
// differs is logged loudly and marked: it answers /readyz 503 until a later
// checkpoint agrees.

// checkpoint is a replica's digest of its state at a log index.
type checkpoint struct {
	Index uint64
	Sum   [32]byte
}

// checkpoints holds the digests a node has computed, newest last.
type checkpoints struct {
	mu     sync.Mutex
	recent []checkpoint
}

// keptCheckpoints is how many digests a node keeps for comparison.
const keptCheckpoints = 8

func (c *checkpoints) add(cp checkpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recent = append(c.recent, cp)
	if len(c.recent) > keptCheckpoints {
		c.recent = c.recent[len(c.recent)-keptCheckpoints:]
	}
}

// at returns the digest at index, if this node has it.
func (c *checkpoints) at(index uint64) ([32]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cp := range c.recent {
		if cp.Index == index {
			return cp.Sum, true
		}
	}
	return [32]byte{}, false
}

// latest returns the newest digest, or the zero checkpoint.
func (c *checkpoints) latest() checkpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.recent) == 0 {
		return checkpoint{}
	}
	return c.recent[len(c.recent)-1]
}

// onCheckpoint is the FSM's hook: the digest is computed off the applying
// goroutine, from the state frozen at the checkpoint's index.
func (n *Node) onCheckpoint(index uint64, digest func() [32]byte) {
	go func() { n.checkpoints.add(checkpoint{Index: index, Sum: digest()}) }()
}

// watchConsistency appends a checkpoint every ConsistencyCheckEvery while
// this node leads.
func (n *Node) watchConsistency() {
	if n.cfg.ConsistencyCheckEvery < 0 {
		return
	}
	onEachTick(n.stopCh, n.cfg.ConsistencyCheckEvery, func() {
		if n.isLeader() {
			if _, err := n.appendCheckpoint(); err != nil {
				n.logger.Debug("appending a consistency checkpoint", "err", err)
			}
		}
	})
}

// appendCheckpoint appends a checkpoint as the leader and returns its index.
func (n *Node) appendCheckpoint() (uint64, error) {
	data, err := fsm.Encode(fsm.CommandCheckpoint, &fsm.CheckpointCommand{})
	if err != nil {
		return 0, err
	}
	future := n.raft.Apply(data, n.requestTimeout)
	if err := n.awaitApplied(future); err != nil {
		return 0, translate(err)
	}
	return future.Index(), nil
}

// compareCheckpoint compares a member's latest digest with this leader's at
// the same index and updates h: DivergedAt becomes the index from which the
// member is known to differ (0 when it agrees; unchanged when it cannot be
// compared yet), AgreedAt the index at which it last agreed (0 once it
// differs).
func (n *Node) compareCheckpoint(h *memberHealth, theirs checkpoint) {
	if theirs.Index == 0 {
		return
	}
	mine, ok := n.checkpoints.at(theirs.Index)
	if !ok {
		return
	}
	if mine != theirs.Sum {
		if h.DivergedAt == 0 {
			n.logger.Error("a member's state differs from the leader's at the same log index: it says it is not ready, and stops voting; restore it from a backup or remove its data and join it again",
				"member", h.ID, "index", theirs.Index)
		}
		h.DivergedAt, h.AgreedAt = theirs.Index, 0
		return
	}
	h.DivergedAt, h.AgreedAt = 0, theirs.Index
}

// A member whose state differs from the leader's must not lead: it would
// decide against that state. So the leader demotes it to a non-voter
// (hashicorp/raft's DemoteVoter: it keeps replicating, but neither votes
// nor stands for election), as long as the voters that agree with the
// leader remain a quorum without it; when a later checkpoint agrees (its
// data was removed and it caught up again, or a restore replaced every
// node's state), it is made a voter again. This cluster has no non-voters
// of its own choosing, so every non-voter it promotes is one it demoted.

// enforceAgreement demotes the voters of servers that differ from the leader
// and promotes the non-voters that agree with it again, from the health view
// of one round.
func (n *Node) enforceAgreement(servers []raft.Server, view []memberHealth) {
	byID := make(map[string]memberHealth, len(view))
	for _, h := range view {
		byID[h.ID] = h
	}
	agreeing, voters := 0, 0
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if byID[string(s.ID)].DivergedAt == 0 {
			agreeing++
		}
	}
	for _, s := range servers {
		h, known := byID[string(s.ID)]
		switch {
		case !known || string(s.ID) == n.cfg.ID:
		case s.Suffrage == raft.Voter && h.DivergedAt != 0:
			// After the demotion the voters are one fewer; those that
			// agree must be a quorum of them.
			if agreeing < (voters-1)/2+1 {
				n.logger.Error("a member's state differs from the leader's, but demoting it would leave fewer agreeing voters than a quorum: it stays a voter", "member", s.ID, "index", h.DivergedAt)
				continue
			}
			if err := n.raft.DemoteVoter(s.ID, 0, 0).Error(); err != nil {
				n.logger.Warn("demoting a member whose state differs", "member", s.ID, "err", err)
				continue
			}
			voters--
			n.logger.Warn("made a member whose state differs from the leader's a non-voter, so that it cannot lead", "member", s.ID, "index", h.DivergedAt)
		case s.Suffrage == raft.Nonvoter && h.DivergedAt == 0 && h.AgreedAt != 0:
			if err := n.raft.AddVoter(s.ID, s.Address, 0, 0).Error(); err != nil {
				n.logger.Warn("making a member that agrees again a voter", "member", s.ID, "err", err)
				continue
			}
			n.logger.Info("a member's state agrees with the leader's again: it is a voter again", "member", s.ID, "index", h.AgreedAt)
		}
	}
}

// CheckConsistency appends a checkpoint on the leader (this node, or by
// forwarding) and waits until every member has taken its digest there (or
// ctx ends), then says which agree with the leader's. A member that did not
// answer in time is listed with Agrees nil.
func (n *Node) CheckConsistency(ctx context.Context) (contract.ConsistencyReport, error) {
	return onLeader(ctx, n, false, func(ctx context.Context) (contract.ConsistencyReport, error) {
		if n.isLeader() {
			return n.checkConsistencyAsLeader(ctx)
		}
		resp, err := n.forwardToLeader(ctx, &forwardRequest{Op: opConsistency})
		if err != nil {
			return contract.ConsistencyReport{}, err
		}
		if resp.Consistency == nil {
			return contract.ConsistencyReport{}, errors.New("cluster: the leader answered a consistency check without its report")
		}
		return *resp.Consistency, nil
	})
}

func (n *Node) checkConsistencyAsLeader(ctx context.Context) (contract.ConsistencyReport, error) {
	index, err := n.appendCheckpoint()
	if err != nil {
		return contract.ConsistencyReport{}, err
	}
	report := contract.ConsistencyReport{Index: index}
	future := n.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return report, translate(err)
	}
	pinger := newForwarder(n.fwd.dialer, healthEvery)
	defer pinger.close()
	for _, s := range future.Configuration().Servers {
		result := contract.MemberConsistency{ID: string(s.ID)}
		if agrees, ok := n.memberAgrees(ctx, pinger, s.ID == raft.ServerID(n.cfg.ID), string(s.Address), index); ok {
			result.Agrees = &agrees
		}
		report.Members = append(report.Members, result)
	}
	return report, nil
}

// memberAgrees waits until a member has taken its digest at index (or a
// later checkpoint this leader also has), and compares it with this
// leader's; ok is false when ctx ended first.
func (n *Node) memberAgrees(ctx context.Context, pinger *forwarder, self bool, addr string, index uint64) (agrees, ok bool) {
	for {
		theirs := n.checkpoints.latest()
		if !self {
			theirs = checkpoint{}
			if resp, err := pinger.send(ctx, addr, &forwardRequest{Op: opPing}); err == nil {
				theirs = resp.Checkpoint
			}
		}
		if theirs.Index >= index {
			if mine, have := n.checkpoints.at(theirs.Index); have {
				return mine == theirs.Sum, true
			}
		}
		select {
		case <-ctx.Done():
			return false, false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// noteDivergence records what the leader's view says of this node.
func (n *Node) noteDivergence(view []memberHealth) {
	for _, h := range view {
		if h.ID == n.cfg.ID {
			if old := n.divergedAt.Swap(h.DivergedAt); old == 0 && h.DivergedAt != 0 {
				n.logger.Error("this node's state differs from the leader's: it says it is not ready; restore it from a backup or remove its data and join it again", "index", h.DivergedAt)
			}
		}
	}
}
