package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/limitnode/limitnode/cluster/internal/raftlog"
	"github.com/limitnode/limitnode/cluster/internal/raftstore"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	bolterrors "go.etcd.io/bbolt/errors"
)

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
	path := filepath.Join(dataDir, "raft.db")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cluster: recover: %s holds no raft.db: give the stopped node's data directory (its -data)", dataDir)
	}
	if err := raftstore.CheckLog(path); err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return fmt.Errorf("cluster: recover: a node is running on %s: stop it first (recover rewrites a stopped node's membership)", dataDir)
		}
		return err
	}
	logStore, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: boltOptions()})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return fmt.Errorf("cluster: recover: a node is running on %s: stop it first (recover rewrites a stopped node's membership)", dataDir)
	}
	if err != nil {
		return fmt.Errorf("cluster: recover: open %s: %w", path, err)
	}
	defer logStore.Close()
	snapshots, err := raft.NewFileSnapshotStoreWithLogger(snapshotDir, 2, raftlog.New(logger, "warn"))
	if err != nil {
		return fmt.Errorf("cluster: recover: open snapshots in %s: %w", snapshotDir, err)
	}
	hasState, err := raft.HasExistingState(logStore, logStore, snapshots)
	if err != nil {
		return fmt.Errorf("cluster: recover: %w", err)
	}
	if !hasState {
		return fmt.Errorf("cluster: recover: %s holds no state to recover", dataDir)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = conf.Servers[0].ID
	rc.Logger = raftlog.New(logger, "warn")
	rc.LogOutput = io.Discard
	_, transport := raft.NewInmemTransport("")
	if err := raft.RecoverCluster(rc, fsm.New(logger), logStore, logStore, snapshots, transport, conf); err != nil {
		return fmt.Errorf("cluster: recover: %w", err)
	}
	return nil
}
