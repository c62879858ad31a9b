package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
)

// formRound is how often a node started with -bootstrap-expect asks the
// -join addresses for their view while its cluster forms.
const formRound = 500 * time.Millisecond

// formAskTimeout bounds one GET /v1/cluster to a -join address.
const formAskTimeout = 2 * time.Second

// peerView is what a node started with -bootstrap-expect learns of another
// node (or of itself) in one round.
type peerView struct {
	via      string // the address that answered; "" for this node itself
	id       string
	raftAddr string
	leader   string
	members  map[string]string // ID to Raft address in its configuration; empty: it has none
}

// wipedGrace is how long a node with no state may be listed in a cluster's
// configuration at its own address before it says its data was probably
// lost: while a cluster forms, that is the moment before the leader's first
// message arrives.
const wipedGrace = 10 * time.Second

// formation is the state of formCluster between rounds: what it has said,
// so that it says each thing once.
type formation struct {
	node        *cluster.Node
	logger      *slog.Logger
	addrs       []string
	expect      int
	opts        client.Options
	self        client.Member
	lastSaid    string
	listedSince time.Time
}

// formCluster brings a node started with -bootstrap-expect into its cluster.
// Each round it asks every -join address for its view (GET /v1/cluster) and:
//   - stops once this node is in a Raft configuration: a cluster holds it,
//     and its leader brings it up to date;
//   - joins through a node that knows a leader whose configuration lacks
//     this node, or lists its ID at another Raft address: the cluster
//     exists already (this node is new, or was rebuilt elsewhere);
//   - waits while some node has a configuration but no leader (the cluster
//     has just formed), or while a leader lists this node at its address
//     (its first message is on the way; if that lasts, the node's data was
//     lost and an operator must remove it so that it joins as a new member);
//   - once every -join address answers, exactly expect distinct nodes (this
//     one included) have answered and none has a configuration, lets the one
//     with the lowest ID form the cluster with all of them, while the others
//     wait for it to bring them in.
//
// Every node computes the same set from the same answers, a node forms a
// cluster only from a state where no node has one, and -join names no more
// than expect addresses, all of which must answer: one cluster forms, never
// two. It returns whether this node formed it, or ctx's error.
func formCluster(ctx context.Context, logger *slog.Logger, node *cluster.Node, addrs []string, expect int, opts client.Options, self client.Member) (bool, error) {
	f := &formation{node: node, logger: logger, addrs: addrs, expect: expect, opts: opts, self: self}
	for {
		if len(node.Status().Members) > 0 {
			logger.Info("this node is in the cluster's configuration")
			return false, nil
		}
		if formed, done := f.round(ctx, f.askPeers(ctx)); done {
			return formed, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("form a cluster of %d: %w", expect, ctx.Err())
		case <-time.After(formRound):
		}
	}
}

// say logs msg at level once, until something else is said.
func (f *formation) say(level slog.Level, msg string, args ...any) {
	if said := fmt.Sprint(msg, args); said != f.lastSaid {
		f.lastSaid = said
		f.logger.Log(context.Background(), level, msg, args...)
	}
}

// round acts on one round's views as formCluster says; done reports that
// formation is over for this node.
func (f *formation) round(ctx context.Context, views []peerView) (formed, done bool) {
	listed := false
	for _, v := range views {
		if v.leader == "" {
			continue
		}
		if addr, ok := v.members[f.self.ID]; ok && addr == f.self.RaftAddr {
			listed = true
			continue
		}
		if err := client.NewWithOptions(f.opts, v.via).Join(ctx, f.self); err != nil {
			f.say(slog.LevelWarn, "join attempt failed", "via", v.via, "err", err)
			return false, false
		}
		f.logger.Info("joined the cluster", "via", v.via)
		return false, true
	}
	if listed {
		if f.listedSince.IsZero() {
			f.listedSince = time.Now()
		}
		if time.Since(f.listedSince) > wipedGrace {
			f.say(slog.LevelError, "the cluster lists this node at its address but it has no state: if its data was lost, remove it (limitnode remove "+f.self.ID+") and it joins again as a new member")
		}
		return false, false
	}
	f.listedSince = time.Time{}
	answered := 0
	byID := map[string]peerView{}
	for _, v := range views {
		if v.via != "" {
			answered++
		}
		if len(v.members) > 0 {
			f.say(slog.LevelInfo, "a cluster has formed: waiting for its leader to bring this node in", "via", v.via)
			return false, false
		}
		if other, ok := byID[v.id]; ok && other.raftAddr != v.raftAddr {
			f.say(slog.LevelError, "two nodes answer with one ID: give each node its own -id", "id", v.id, "raft_addrs", other.raftAddr+","+v.raftAddr)
			return false, false
		}
		byID[v.id] = v
	}
	ids := slices.Sorted(maps.Keys(byID))
	seen := strings.Join(ids, ",")
	switch {
	case len(ids) > f.expect:
		f.say(slog.LevelError, "more nodes answer than -bootstrap-expect: no cluster forms until the flags agree", "expect", f.expect, "nodes", seen)
		return false, false
	case answered < len(f.addrs) || len(ids) < f.expect:
		f.say(slog.LevelInfo, "waiting for the nodes of a new cluster", "expect", f.expect, "nodes", seen, "answered", fmt.Sprintf("%d of %d -join addresses", answered, len(f.addrs)))
		return false, false
	case ids[0] != f.self.ID:
		f.say(slog.LevelInfo, "all nodes found: waiting for the lowest ID to form the cluster", "nodes", seen, "former", ids[0])
		return false, false
	}
	members := make([]contract.Member, 0, len(ids))
	for _, id := range ids {
		members = append(members, contract.Member{ID: id, RaftAddr: byID[id].raftAddr})
	}
	if err := f.node.FormCluster(members); err != nil {
		f.say(slog.LevelError, "forming the cluster failed", "err", err)
		return false, false
	}
	f.logger.Info("this node has the lowest ID of those expected: it starts the cluster", "nodes", seen)
	return true, true
}

// askPeers returns this node's view and that of every -join address that
// answers within formAskTimeout.
func (f *formation) askPeers(ctx context.Context) []peerView {
	own := f.node.Status()
	views := []peerView{{id: own.SelfID, raftAddr: own.SelfRaftAddr, leader: own.LeaderID}}
	for _, addr := range f.addrs {
		askCtx, cancel := context.WithTimeout(ctx, formAskTimeout)
		st, err := client.NewWithOptions(f.opts, addr).Cluster(askCtx)
		cancel()
		if wrong := raftPortGiven(addr, err); wrong != nil {
			f.say(slog.LevelError, "a -join address is a Raft port: the cluster cannot form until -join names HTTP addresses", "err", wrong)
			continue
		}
		if err != nil {
			f.logger.Debug("no answer yet", "addr", addr, "err", err)
			continue
		}
		v := peerView{via: addr, id: st.Self, raftAddr: st.SelfRaftAddr, leader: st.Leader, members: map[string]string{}}
		for _, n := range st.Nodes {
			v.members[n.ID] = n.RaftAddr
		}
		views = append(views, v)
	}
	return views
}
