package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/contract"
)

// healthEvery is how often the leader asks every member how it is.
const healthEvery = time.Second

// memberHealth is the leader's view of one member, as the ping of
// healthEvery sees it. It travels in pings, so every member can show it.
type memberHealth struct {
	ID string
	// SinceContactNanos is how long before the view was taken the member
	// last answered; -1: never. Durations, not instants, so that no two
	// nodes' clocks are compared.
	SinceContactNanos int64
	// Reachable is whether it answered the latest ping.
	Reachable bool
	// AppliedIndex is the member's applied index at its latest answer.
	AppliedIndex uint64
	// LeaderApplied is the leader's applied index at that moment, so the
	// member's lag can be told.
	LeaderApplied uint64
	// DivergedAt is the checkpoint index at which the member's state
	// differed from the leader's, or 0 (see consistency.go).
	DivergedAt uint64
	// AgreedAt is the checkpoint index at which the member's state last
	// agreed with the leader's, or 0 since it differs.
	AgreedAt uint64
}

// healthView is the latest view of the members a node knows: its own as
// leader, or the one the leader last sent it.
type healthView struct {
	mu      sync.Mutex
	members map[string]memberHealth
	takenAt time.Time // when, by this node's monotonic clock, the view was true
}

func (v *healthView) set(members []memberHealth, takenAt time.Time) {
	m := make(map[string]memberHealth, len(members))
	for _, h := range members {
		m[h.ID] = h
	}
	v.mu.Lock()
	v.members, v.takenAt = m, takenAt
	v.mu.Unlock()
}

// list returns the view as it is now: contact ages grown by the time since
// it was taken.
func (v *healthView) list() []memberHealth {
	v.mu.Lock()
	defer v.mu.Unlock()
	aged := int64(time.Since(v.takenAt))
	out := make([]memberHealth, 0, len(v.members))
	for _, h := range v.members {
		if h.SinceContactNanos >= 0 {
			h.SinceContactNanos += aged
		}
		out = append(out, h)
	}
	return out
}

func (v *healthView) get(id string) (memberHealth, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	h, ok := v.members[id]
	if ok && h.SinceContactNanos >= 0 {
		h.SinceContactNanos += int64(time.Since(v.takenAt))
	}
	return h, ok
}

// watchHealth runs on every node; while it leads, it pings every other
// member each healthEvery, through the same (mutual TLS) channel as Raft,
// and sends each the view it has, so that a member that is down shows as
// unreachable on every survivor's /v1/cluster.
func (n *Node) watchHealth() {
	pinger := newForwarder(n.fwd.dialer, healthEvery)
	defer pinger.close()
	onEachTick(n.stopCh, healthEvery, func() {
		switch {
		case n.isLeader():
			n.progress.clear()
			n.pingMembers(pinger)
		case !n.knowsLeader():
			n.probeVoters()
		default:
			n.quorumWait.Store(nil)
		}
	})
}

// knowsLeader reports whether this node knows a leader.
func (n *Node) knowsLeader() bool {
	_, id := n.raft.LeaderWithID()
	return id != ""
}

// quorumWait is what a node without a leader found when it last asked its
// configuration's voters who answers: what /readyz says it waits for.
type quorumWait struct {
	voters int
	silent []raft.Server
}

// probeVoters pings every voter of this node's configuration, for a node
// that knows no leader: without a quorum of them answering, no leader can
// be elected, and the operator needs to know which are missing.
func (n *Node) probeVoters() {
	servers, err := n.servers()
	if err != nil {
		return
	}
	var voters []raft.Server
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, s)
		}
	}
	n.quorumWait.Store(&quorumWait{voters: len(voters), silent: n.silentMembers(voters)})
}

// noLeaderReason says why a member knows no leader, from the latest
// probeVoters.
func (n *Node) noLeaderReason() string {
	w := n.quorumWait.Load()
	switch {
	case w == nil:
		return "no leader known"
	case len(w.silent) > w.voters-(w.voters/2+1):
		return fmt.Sprintf("no leader known: waiting for a quorum of %d of the %d voters; not answering: %s (a cluster restarts once a majority of its voters run: start them)",
			w.voters/2+1, w.voters, describeServers(w.silent))
	default:
		return "no leader known: an election is under way"
	}
}

// pingMembers asks every other member for its applied index, sending the
// view of the previous round, and records the answers.
func (n *Node) pingMembers(pinger *forwarder) {
	future := n.raft.GetConfiguration()
	if future.Error() != nil {
		return
	}
	previous := n.health.list()
	prev := make(map[string]memberHealth, len(previous))
	for _, h := range previous {
		prev[h.ID] = h
	}
	start, applied := time.Now(), n.raft.AppliedIndex()
	var mu sync.Mutex
	next := []memberHealth{{ID: n.cfg.ID, Reachable: true, AppliedIndex: applied, LeaderApplied: applied}}
	var wg sync.WaitGroup
	for _, s := range future.Configuration().Servers {
		if string(s.ID) == n.cfg.ID {
			continue
		}
		wg.Go(func() {
			h, known := prev[string(s.ID)]
			if !known {
				h.SinceContactNanos = -1
			}
			h.ID, h.Reachable = string(s.ID), false
			ctx, cancel := context.WithTimeout(context.Background(), healthEvery)
			defer cancel()
			resp, err := pinger.send(ctx, string(s.Address), &forwardRequest{Op: opPing, Health: previous, LeaderApplied: applied})
			if err == nil && resp.NodeID == string(s.ID) {
				// Answered within this round: as of the round's start,
				// contact is now.
				h.Reachable, h.SinceContactNanos, h.AppliedIndex, h.LeaderApplied = true, 0, resp.AppliedIndex, n.raft.AppliedIndex()
				n.compareCheckpoint(&h, resp.Checkpoint)
			} else if known && h.SinceContactNanos >= 0 {
				h.SinceContactNanos = prev[string(s.ID)].SinceContactNanos
			}
			mu.Lock()
			next = append(next, h)
			mu.Unlock()
		})
	}
	wg.Wait()
	n.health.set(next, start)
	n.enforceAgreement(future.Configuration().Servers, next)
}

// memberHealthOf fills a member's status with what the leader knows of it.
func (n *Node) memberHealthOf(ms *contract.MemberStatus, leaderID raft.ServerID) {
	if string(leaderID) == "" {
		return
	}
	h, ok := n.health.get(ms.ID)
	if !ok {
		return
	}
	health := contract.MemberHealth{Reachable: h.Reachable, AppliedIndex: h.AppliedIndex, SinceContact: -1, DivergedAt: h.DivergedAt}
	if h.SinceContactNanos >= 0 {
		health.SinceContact = time.Duration(h.SinceContactNanos)
	}
	if ms.ID == string(leaderID) {
		health.SinceContact = 0
	}
	if h.LeaderApplied > h.AppliedIndex {
		health.Lag = h.LeaderApplied - h.AppliedIndex
	}
	ms.Health = &health
}
