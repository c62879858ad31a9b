// Package identity is what a data directory records of who it belongs to:
// the ID of the node whose Raft state it holds, so that a node opened on
// another's directory refuses to start, and the ID of the cluster the node
// belongs to, which the transport's hello names on every connection so that
// nodes of two clusters refuse each other. Both live in Raft's stable store
// (raft.db), under keys Raft's own never meet.
package identity

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Records are one node's identity records: its own ID, recorded once it is
// a member, and its cluster's ID.
type Records struct {
	nodeID string
	logger *slog.Logger
	stable raft.StableStore // set by Open
	// member is set once the data directory records this node's ID.
	member atomic.Bool
	// clusterID (a string) is the cluster this node belongs to, or unset
	// while it knows none; clusterIDMu orders its recording, appendedTerm
	// is the term in which this node, leading, appended it, and
	// foreignLogged is set once a foreign ID in the state was logged.
	clusterID     atomic.Value
	clusterIDMu   sync.Mutex
	appendedTerm  atomic.Uint64
	foreignLogged atomic.Bool
}

// New returns the records of node nodeID, empty until Open reads them.
// ClusterID may be called at once (the transport asks it before the stores
// open).
func New(nodeID string, logger *slog.Logger) *Records {
	return &Records{nodeID: nodeID, logger: logger}
}

// Open reads the records of the data directory dir from its stores, after
// checking that the directory is this node's (see checkOwner); hasState
// says whether the stores hold Raft state, advertise is this node's Raft
// address.
func (r *Records) Open(stable raft.StableStore, logs raft.LogStore, snapshots raft.SnapshotStore, hasState bool, dir, advertise string) error {
	if err := checkOwner(stable, logs, snapshots, hasState, dir, r.nodeID, advertise); err != nil {
		return err
	}
	clusterID, err := readClusterID(stable)
	if err != nil {
		return err
	}
	if clusterID != "" {
		r.clusterID.Store(clusterID)
	}
	r.stable = stable
	r.member.Store(hasState)
	return nil
}

// IsRecordedMember reports whether the data directory records that this
// node has been a member of its cluster.
func (r *Records) IsRecordedMember() bool { return r.member.Load() }

// RecordMember records, once, that the data directory is this node's: at
// bootstrap, or when it first finds itself a member of a cluster it joined.
func (r *Records) RecordMember() {
	if r.member.Swap(true) {
		return
	}
	if err := recordOwner(r.stable, r.nodeID); err != nil {
		r.member.Store(false)
		r.logger.Warn("recording this node's ID in its data directory", "err", err)
	}
}

// ClusterID returns the ID of the cluster this node belongs to, or "" while
// it knows none.
func (r *Records) ClusterID() string {
	id, _ := r.clusterID.Load().(string)
	return id
}

// SetClusterID records id as this node's cluster, in its stable store and
// in memory; a node that belongs to a cluster already keeps it.
func (r *Records) SetClusterID(id string) error {
	r.clusterIDMu.Lock()
	defer r.clusterIDMu.Unlock()
	if r.ClusterID() != "" {
		return nil
	}
	if err := r.stable.Set(clusterIDKey, []byte(id)); err != nil {
		return fmt.Errorf("cluster: record the cluster ID: %w", err)
	}
	r.clusterID.Store(id)
	return nil
}

// Adopt is the state machine's hook, called when the replicated state
// comes to hold the cluster's ID: a node that knows none takes it (a new
// member, or a member of a cluster created before clusters had IDs); one
// that knows another says so, once, and keeps its own, which its peers
// refuse.
func (r *Records) Adopt(id string) {
	mine := r.ClusterID()
	switch {
	case mine == id:
	case mine == "":
		if err := r.SetClusterID(id); err != nil {
			r.logger.Error("recording the cluster's ID in the data directory", "err", err)
			return
		}
		r.logger.Info("this node belongs to cluster "+id, "cluster_id", id)
	case r.foreignLogged.CompareAndSwap(false, true):
		r.logger.Error("the replicated state names another cluster than this node's data directory: this node keeps its own and the other cluster's nodes refuse it",
			"cluster_id", mine, "state_cluster_id", id)
	}
}

// EnsureAppended is for the leader of term: when the applied state holds
// no cluster ID (applied is ""), it appends one with appendID: the ID
// recorded at bootstrap or, for a cluster formed before clusters had IDs, a
// new one. The first one applied wins, so two leaders racing (or an entry
// not yet applied here) cannot give a cluster two IDs. It is tried once per
// term.
func (r *Records) EnsureAppended(term uint64, applied string, appendID func(id string) error) {
	if applied != "" || r.appendedTerm.Load() == term {
		return
	}
	id := r.ClusterID()
	if id == "" {
		id = NewClusterID()
	}
	if err := appendID(id); err != nil {
		r.logger.Debug("appending the cluster's ID", "err", err)
		return
	}
	r.appendedTerm.Store(term)
}

// nodeIDKey is where a data directory's stable store (raft.db) records the
// ID of the node it belongs to. Raft's own keys are spelt differently, so
// the two never meet.
var nodeIDKey = []byte("limitnode.node_id")

// ErrWrongDirectory means the data directory belongs to another node: its
// Raft state (votes, log, membership) is that node's, and a node under
// another ID on it would answer as a stranger to its own cluster.
var ErrWrongDirectory = errors.New("the data directory belongs to another node")

// checkOwner refuses a data directory that belongs to another node ID:
// the one its stable store records or, for a directory written before the
// ID was recorded, the ID its last configuration gives this node's Raft
// address. A directory that passes and holds state is recorded as id's.
func checkOwner(stable raft.StableStore, logs raft.LogStore, snapshots raft.SnapshotStore, hasState bool, dir, id, advertise string) error {
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
	return recordOwner(stable, id)
}

func wrongDirectory(dir, owner, id string) error {
	return fmt.Errorf("cluster: %w: %s belongs to node %q, not %q; start it with -id %s, or give node %q an empty data directory and join it",
		ErrWrongDirectory, dir, owner, id, owner, id)
}

// recordOwner records id as the owner of the stable store's directory.
func recordOwner(stable raft.StableStore, id string) error {
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

// NewClusterID draws a cluster's ID: 16 random bytes in hex, so that two
// clusters formed anywhere never share one.
func NewClusterID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(raw[:])
}
