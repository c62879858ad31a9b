package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// Join adds m to the cluster as a voter, or updates it if a member with the
// same ID and Raft address is already there (so a retried join is harmless).
// A member with the same ID at another address, or another ID at the same
// address, is removed first: that is a node that was rebuilt. Any member may
// be asked; a follower passes the request to the leader.
func (n *Node) Join(ctx context.Context, m contract.Member) error {
	if err := m.Validate(); err != nil {
		return err
	}
	return n.leaderOp(ctx, &forwardRequest{Op: opJoin, Member: m}, func() error { return n.joinAsLeader(m) })
}

// RemoveMember removes the member with the given ID from the cluster.
// Removing the leader itself is allowed: it steps down once the change is
// committed. It returns ErrNotFound if there is no such member.
func (n *Node) RemoveMember(ctx context.Context, id string) error {
	if err := contract.ValidateNodeID(id); err != nil {
		return err
	}
	return n.leaderOp(ctx, &forwardRequest{Op: opRemove, Member: contract.Member{ID: id}}, func() error { return n.removeAsLeader(id) })
}

func (n *Node) joinAsLeader(m contract.Member) error {
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
		if err := n.ping(m); err != nil {
			return err
		}
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
		return contract.NotFound("id", "no member %q", id)
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

// watchLeadership reacts to changes of leader: it drops pooled forwarding
// connections to the old leader and makes sure the replicated state knows
// this node's HTTP address. It records the address only, never adds the
// node: a member that was removed stays out until an operator joins it.
func (n *Node) watchLeadership() {
	observations := make(chan raft.Observation, 16)
	observer := raft.NewObserver(observations, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(observer)
	defer n.raft.DeregisterObserver(observer)
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	wasMember := false
	lastLeader := raft.ServerAddress("")
	for {
		select {
		case <-n.stopCh:
			return
		case <-observations:
		case <-ticker.C:
		}
		addr, _ := n.raft.LeaderWithID()
		if addr != lastLeader {
			n.metrics.leaderChanges.Inc()
			lastLeader = addr
		}
		n.fwd.dropExcept(string(addr))
		member := n.isMember()
		if wasMember && !member && !n.removed.Swap(true) {
			n.logger.Warn("this node was removed from the cluster: it decides nothing and /readyz answers 503 until an operator joins it again")
		}
		if member {
			n.removed.Store(false)
		}
		wasMember = wasMember || member
		if addr != "" && n.cfg.HTTPAddr != "" && n.fsm.NodeHTTPAddr(n.cfg.ID) != n.cfg.HTTPAddr && member {
			ctx, cancel := context.WithTimeout(context.Background(), n.requestTimeout)
			self := contract.Member{ID: n.cfg.ID, RaftAddr: n.advertise, HTTPAddr: n.cfg.HTTPAddr}
			if err := n.leaderOp(ctx, &forwardRequest{Op: opRegister, Member: self}, func() error { return n.registerAsLeader(self) }); err != nil {
				n.logger.Debug("recording this node's HTTP address", "err", err)
			}
			cancel()
		}
	}
}

// pingTimeout bounds the leader's check that a member to add answers.
const pingTimeout = 3 * time.Second

// ping checks, before a member is added, that its Raft address answers as
// the limitnode node it claims to be: a voter that cannot be reached (a
// typo, a node not started, a certificate of another CA) would count toward
// the quorum and could cost the cluster its majority.
func (n *Node) ping(m contract.Member) error {
	conn, err := n.fwd.dialer.open(m.RaftAddr, protocolForward, pingTimeout)
	if err != nil {
		return contract.Invalid("raft_addr", "%s does not answer as a limitnode node (start it first; with TLS, its certificate must be signed by the cluster's CA): %v", m.RaftAddr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(pingTimeout))
	fc := newForwardConn(conn)
	var resp forwardResponse
	err = fc.write(&forwardRequest{Op: opPing})
	if err == nil {
		err = fc.read(&resp)
	}
	switch {
	case err != nil:
		return contract.Invalid("raft_addr", "%s does not answer as a limitnode node: %v", m.RaftAddr, err)
	case resp.NodeID != m.ID:
		return contract.Invalid("id", "the node at %s is %q, not %q", m.RaftAddr, resp.NodeID, m.ID)
	}
	return nil
}

// registerAsLeader records the HTTP address of a node that is a member at
// its Raft address; a node that is not (it was removed) is refused, so that
// only Join adds voters.
func (n *Node) registerAsLeader(m contract.Member) error {
	future := n.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return translate(err)
	}
	for _, s := range future.Configuration().Servers {
		if string(s.ID) == m.ID && string(s.Address) == m.RaftAddr {
			if n.fsm.NodeHTTPAddr(m.ID) == m.HTTPAddr {
				return nil
			}
			return n.applyCommand(fsm.CommandSetNode, &fsm.NodeCommand{ID: m.ID, HTTPAddr: m.HTTPAddr})
		}
	}
	return contract.NotFound("id", "%q at %s is not a member; join it first", m.ID, m.RaftAddr)
}

// isMember reports whether this node is in the latest configuration it
// knows. A node that was removed (and has learnt so) is not.
func (n *Node) isMember() bool {
	future := n.raft.GetConfiguration()
	if future.Error() != nil {
		return false
	}
	for _, s := range future.Configuration().Servers {
		if string(s.ID) == n.cfg.ID {
			return true
		}
	}
	return false
}

// TransferLeadership hands leadership over to the member to (any other
// voter, when to is ""), and waits until it has taken it. Any member may be
// asked; a follower passes it to the leader.
func (n *Node) TransferLeadership(ctx context.Context, to string) error {
	if to != "" {
		if err := contract.ValidateNodeID(to); err != nil {
			return err
		}
	}
	if err := n.leaderOp(ctx, &forwardRequest{Op: opTransfer, Member: contract.Member{ID: to}}, func() error { return n.transferAsLeader(to) }); err != nil {
		return err
	}
	// Answer once this node knows the new leader, so the caller's next
	// question finds it.
	ctx, cancel := n.withDeadline(ctx)
	defer cancel()
	for {
		_, id := n.raft.LeaderWithID()
		if id != "" && (to == "" || string(id) == to) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // handed over; this node has not heard yet
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (n *Node) transferAsLeader(to string) error {
	if to == n.cfg.ID {
		return nil // it leads already
	}
	if to == "" {
		if n.otherVoters() == 0 {
			return contract.Invalid("to", "there is no other voter to hand leadership to")
		}
		return translate(n.raft.LeadershipTransfer().Error())
	}
	future := n.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return translate(err)
	}
	for _, s := range future.Configuration().Servers {
		if string(s.ID) == to {
			return translate(n.raft.LeadershipTransferToServer(s.ID, s.Address).Error())
		}
	}
	return contract.NotFound("to", "no member %q", to)
}
