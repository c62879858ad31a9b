package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/cluster/internal/identity"
	"github.com/limitnode/limitnode/cluster/internal/raftstore"
	"github.com/limitnode/limitnode/contract"
)

// firstConfiguration is the Raft configuration a new cluster starts with:
// every member a voter, in ID order, so that nodes given the same members
// build the same configuration.
func firstConfiguration(members []contract.Member) raft.Configuration {
	sorted := slices.SortedFunc(slices.Values(members), func(a, b contract.Member) int { return strings.Compare(a.ID, b.ID) })
	var conf raft.Configuration
	for _, m := range sorted {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr)})
	}
	return conf
}

// FormCluster starts a new cluster whose voters are members, this node
// among them, from a node that has no state (opened without Bootstrap).
// This node then stands for election and, once it leads, brings the others
// in; they must have no state either and must not form a cluster of their
// own: exactly one node of a new cluster calls FormCluster. A node that
// already has state (or a configuration) gets a *contract.Error with code
// conflict and nothing changes.
func (n *Node) FormCluster(members []contract.Member) error {
	self := false
	for _, m := range members {
		if err := m.Validate(); err != nil {
			return err
		}
		self = self || (m.ID == n.cfg.ID && m.RaftAddr == n.advertise)
	}
	if !self {
		return contract.Invalid("members", "the members must include this node (%s at %s)", n.cfg.ID, n.advertise)
	}
	err := n.raft.BootstrapCluster(firstConfiguration(members)).Error()
	if errors.Is(err, raft.ErrCantBootstrap) {
		return contract.Conflict("members", "this node already has state: it belongs to a cluster")
	}
	if err != nil {
		return fmt.Errorf("cluster: form a cluster: %w", err)
	}
	if err := n.identity.SetClusterID(identity.NewClusterID()); err != nil {
		n.logger.Error("recording the new cluster's ID", "err", err)
	}
	n.logger.Info("formed a new cluster", "members", len(members), "cluster_id", n.ClusterID())
	return nil
}

// Recover rewrites the membership stored in a stopped node's data directory
// to members, for a cluster that has lost its quorum for good (a majority of
// voters gone, or joins that named dead nodes). It is hashicorp/raft's
// RecoverCluster, as Consul and rqlite use it with a peers.json: run it on
// every surviving node with the same members, then start them; they elect a
// leader among themselves. The node's state (its snapshot and log) is kept.
//
// It is a last resort: entries the lost members held and the survivors did
// not are gone, and running it on a node of a healthy cluster splits it.
func Recover(dataDir, snapshotDir string, members []contract.Member, logger *slog.Logger) error {
	if len(members) == 0 {
		return fmt.Errorf("cluster: recover needs at least one member")
	}
	var conf raft.Configuration
	for _, m := range members {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("cluster: recover: member %q: %w", m.ID, err)
		}
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr)})
	}
	if logger == nil {
		logger = slog.Default()
	}
	if snapshotDir == "" {
		snapshotDir = dataDir
	}
	return raftstore.Recover(dataDir, snapshotDir, conf, logger)
}
