package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/transport"
)

// nodeIDKey is where a data directory's stable store (raft.db) records the
// ID of the node it belongs to. Raft's own keys are spelt differently, so
// the two never meet.
var nodeIDKey = []byte("limitnode.node_id")

// ErrWrongDirectory means the data directory belongs to another node: its
// Raft state (votes, log, membership) is that node's, and a node under
// another ID on it would answer as a stranger to its own cluster.
var ErrWrongDirectory = errors.New("the data directory belongs to another node")

// checkIdentity refuses a data directory that belongs to another node ID:
// the one its stable store records or, for a directory written before the
// ID was recorded, the ID its last configuration gives this node's Raft
// address. A directory that passes and holds state is recorded as id's.
func checkIdentity(stable raft.StableStore, logs raft.LogStore, snapshots raft.SnapshotStore, hasState bool, dir, id, advertise string) error {
	owner, err := stable.Get(nodeIDKey)
	switch {
	case err == nil && string(owner) != id:
		return wrongDirectory(dir, string(owner), id)
	case err == nil:
		return nil
	case !errors.Is(err, raftboltdb.ErrKeyNotFound):
		return fmt.Errorf("cluster: read the node ID of %s: %w", dir, err)
	case !hasState:
		return nil // recorded once the node bootstraps or joins
	}
	conf, err := lastConfiguration(logs, snapshots)
	if err != nil {
		return err
	}
	for _, s := range conf.Servers {
		if string(s.Address) == advertise && string(s.ID) != id {
			return wrongDirectory(dir, string(s.ID), id)
		}
	}
	return recordIdentity(stable, id)
}

func wrongDirectory(dir, owner, id string) error {
	return fmt.Errorf("cluster: %w: %s belongs to node %q, not %q; start it with -id %s, or give node %q an empty data directory and join it",
		ErrWrongDirectory, dir, owner, id, owner, id)
}

// recordIdentity records id as the owner of the stable store's directory.
func recordIdentity(stable raft.StableStore, id string) error {
	if err := stable.Set(nodeIDKey, []byte(id)); err != nil {
		return fmt.Errorf("cluster: record the node ID: %w", err)
	}
	return nil
}

// lastConfiguration is the newest configuration in the log or, when the log
// holds none after the latest snapshot, the snapshot's.
func lastConfiguration(logs raft.LogStore, snapshots raft.SnapshotStore) (raft.Configuration, error) {
	var conf raft.Configuration
	var snapshotIndex uint64
	metas, err := snapshots.List()
	if err != nil {
		return conf, fmt.Errorf("cluster: list snapshots: %w", err)
	}
	if len(metas) > 0 {
		conf, snapshotIndex = metas[0].Configuration, metas[0].Index
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return conf, fmt.Errorf("cluster: read the log: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return conf, fmt.Errorf("cluster: read the log: %w", err)
	}
	for i := last; i >= max(first, snapshotIndex+1) && i > 0; i-- {
		var entry raft.Log
		if err := logs.GetLog(i, &entry); err != nil {
			return conf, fmt.Errorf("cluster: read log entry %d: %w", i, err)
		}
		if entry.Type == raft.LogConfiguration {
			return raft.DecodeConfiguration(entry.Data), nil
		}
	}
	return conf, nil
}

// clusterIDKey is where a data directory's stable store records the ID of
// the cluster it belongs to, so that a node knows it before Raft replays
// anything (the transport's hello names it on every connection).
var clusterIDKey = []byte("limitnode.cluster_id")

// ErrForeignCluster means two nodes belong to different clusters: a node was
// started on another cluster's data directory, or asked to join a cluster
// it is not part of. They refuse each other on every connection.
var ErrForeignCluster = transport.ErrForeignCluster

// readClusterID returns the cluster ID a stable store records, or "".
func readClusterID(stable raft.StableStore) (string, error) {
	id, err := stable.Get(clusterIDKey)
	switch {
	case errors.Is(err, raftboltdb.ErrKeyNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("cluster: read the cluster ID: %w", err)
	}
	return string(id), nil
}

// newClusterID draws a cluster's ID: 16 random bytes in hex, so that two
// clusters formed anywhere never share one.
func newClusterID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(raw[:])
}

// ClusterID returns the ID of the cluster this node belongs to, or "" while
// it knows none (a node being joined, before the cluster's state reaches
// it).
func (n *Node) ClusterID() string {
	id, _ := n.clusterID.Load().(string)
	return id
}

// setClusterID records id as this node's cluster, in its stable store and
// in memory; a node that belongs to a cluster already keeps it.
func (n *Node) setClusterID(id string) error {
	n.clusterIDMu.Lock()
	defer n.clusterIDMu.Unlock()
	if n.ClusterID() != "" {
		return nil
	}
	if err := n.logStore.Set(clusterIDKey, []byte(id)); err != nil {
		return fmt.Errorf("cluster: record the cluster ID: %w", err)
	}
	n.clusterID.Store(id)
	return nil
}

// adoptClusterID is the FSM's hook, called when the replicated state comes
// to hold the cluster's ID: a node that knows none takes it (a new member,
// or a member of a cluster created before clusters had IDs); one that knows
// another says so, once, and keeps its own, which its peers refuse.
func (n *Node) adoptClusterID(id string) {
	mine := n.ClusterID()
	switch {
	case mine == id:
	case mine == "":
		if err := n.setClusterID(id); err != nil {
			n.logger.Error("recording the cluster's ID in the data directory", "err", err)
			return
		}
		n.logger.Info("this node belongs to cluster "+id, "cluster_id", id)
	case n.foreignLogged.CompareAndSwap(false, true):
		n.logger.Error("the replicated state names another cluster than this node's data directory: this node keeps its own and the other cluster's nodes refuse it",
			"cluster_id", mine, "state_cluster_id", id)
	}
}

// ensureClusterID, on the leader, appends the cluster's ID when the applied
// state holds none: the ID recorded at bootstrap or, for a cluster formed
// before clusters had IDs, a new one. The first one applied wins, so two
// leaders racing (or an entry not yet applied here) cannot give a cluster
// two IDs. It is tried once per term.
func (n *Node) ensureClusterID() {
	term := n.raft.CurrentTerm()
	if !n.IsLeader() || n.fsm.ClusterID() != "" || n.clusterIDTerm.Load() == term {
		return
	}
	id := n.ClusterID()
	if id == "" {
		id = newClusterID()
	}
	if err := n.replica.applyCommand(fsm.CommandSetClusterID, &fsm.ClusterIDCommand{ID: id}); err != nil {
		n.logger.Debug("appending the cluster's ID", "err", err)
		return
	}
	n.clusterIDTerm.Store(term)
}
