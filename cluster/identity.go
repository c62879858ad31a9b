package cluster

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
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
