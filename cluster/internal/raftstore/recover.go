package raftstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/cluster/internal/raftlog"
	"github.com/limitnode/limitnode/fsm"
)

// Recover rewrites the membership stored in a stopped node's data
// directory to conf (see cluster.Recover): hashicorp/raft's RecoverCluster
// on the node's stores, which it keeps.
func Recover(dataDir, snapshotDir string, conf raft.Configuration, logger *slog.Logger) error {
	path := filepath.Join(dataDir, "raft.db")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cluster: recover: %s holds no raft.db: give the stopped node's data directory (its -data)", dataDir)
	}
	logStore, err := openLog(path, false, func(err error) error { return fmt.Errorf("cluster: recover: open %s: %w", path, err) })
	if errors.Is(err, ErrInUse) {
		return fmt.Errorf("cluster: recover: a node is running on %s: stop it first (recover rewrites a stopped node's membership)", dataDir)
	}
	if err != nil {
		return err
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
