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
	members  []string // IDs in its Raft configuration; empty: it has none
}

// formCluster brings a node started with -bootstrap-expect into its cluster.
// Each round it asks every -join address for its view (GET /v1/cluster) and:
//   - stops once this node is in a Raft configuration: a cluster holds it,
//     and its leader brings it up to date;
//   - joins through a node that knows a leader whose configuration lacks
//     this node: the cluster exists already (this node is new or was wiped);
//   - waits while some node has a configuration but no leader: the cluster
//     has just formed;
//   - once exactly expect distinct nodes, this one included, answer and none
//     has a configuration, lets the one with the lowest ID form the cluster
//     with all of them, while the others wait for it to bring them in.
//
// Every node computes the same set from the same answers, and a node forms
// a cluster only from a state where no node has one, so one cluster forms,
// never two. It returns whether this node formed it, or ctx's error.
func formCluster(ctx context.Context, logger *slog.Logger, node *cluster.Node, addrs []string, expect int, opts client.Options, self client.Member) (bool, error) {
	var lastSeen string
	for {
		if len(node.Status().Members) > 0 {
			logger.Info("this node is in the cluster's configuration")
			return false, nil
		}
		views := askPeers(ctx, logger, node, addrs, opts)
		if formed, done, err := decideFormation(ctx, logger, node, views, expect, opts, self, &lastSeen); done {
			return formed, err
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("form a cluster of %d: %w", expect, ctx.Err())
		case <-time.After(formRound):
		}
	}
}

// decideFormation takes one round's views and acts on them as formCluster
// says; done reports that formation is over for this node.
func decideFormation(ctx context.Context, logger *slog.Logger, node *cluster.Node, views []peerView, expect int, opts client.Options, self client.Member, lastSeen *string) (formed, done bool, err error) {
	for _, v := range views {
		if v.leader == "" || slices.Contains(v.members, self.ID) {
			continue
		}
		if err := client.NewWithOptions(opts, v.via).Join(ctx, self); err != nil {
			logger.Warn("join attempt failed", "via", v.via, "err", err)
			return false, false, nil
		}
		logger.Info("joined the cluster", "via", v.via)
		return false, true, nil
	}
	byID := map[string]peerView{}
	for _, v := range views {
		if len(v.members) > 0 {
			return false, false, nil // formed, electing: wait to be brought in
		}
		if other, ok := byID[v.id]; ok && other.raftAddr != v.raftAddr {
			logger.Error("two nodes answer with one ID: give each node its own -id", "id", v.id, "raft_addrs", []string{other.raftAddr, v.raftAddr})
			return false, false, nil
		}
		byID[v.id] = v
	}
	ids := slices.Sorted(maps.Keys(byID))
	if seen := strings.Join(ids, ","); seen != *lastSeen {
		*lastSeen = seen
		if len(ids) > expect {
			logger.Error("more nodes answer than -bootstrap-expect: no cluster forms until the flags agree", "expect", expect, "nodes", seen)
		} else {
			logger.Info("waiting for the nodes of a new cluster", "expect", expect, "nodes", seen)
		}
	}
	if len(ids) != expect || ids[0] != self.ID {
		return false, false, nil
	}
	members := make([]contract.Member, 0, len(ids))
	for _, id := range ids {
		members = append(members, contract.Member{ID: id, RaftAddr: byID[id].raftAddr})
	}
	if err := node.FormCluster(members); err != nil {
		logger.Error("forming the cluster failed", "err", err)
		return false, false, nil
	}
	logger.Info("this node has the lowest ID of those expected: it starts the cluster", "nodes", *lastSeen)
	return true, true, nil
}

// askPeers returns this node's view and that of every -join address that
// answers within formAskTimeout.
func askPeers(ctx context.Context, logger *slog.Logger, node *cluster.Node, addrs []string, opts client.Options) []peerView {
	own := node.Status()
	views := []peerView{{id: own.SelfID, raftAddr: own.SelfRaftAddr, leader: own.LeaderID}}
	for _, addr := range addrs {
		askCtx, cancel := context.WithTimeout(ctx, formAskTimeout)
		st, err := client.NewWithOptions(opts, addr).Cluster(askCtx)
		cancel()
		if err != nil {
			logger.Debug("no answer yet", "addr", addr, "err", err)
			continue
		}
		v := peerView{via: addr, id: st.Self, raftAddr: st.SelfRaftAddr, leader: st.Leader}
		for _, n := range st.Nodes {
			v.members = append(v.members, n.ID)
		}
		views = append(views, v)
	}
	return views
}
