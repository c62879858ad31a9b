package raftstore

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// boltOptions are the options of raft.db:
//   - bbolt waits forever for the file lock by default; a second process on
//     the same directory must fail instead (Timeout);
//   - the free-page list is not written with every transaction but rebuilt
//     by a scan when the file is opened (NoFreelistSync), and kept as a map
//     (FreelistMapType), as etcd does: a Raft log appends at its end and
//     deletes from its start, so the list of free pages grows with every
//     truncation, and writing it with every append made an append cost
//     about twice the two fsyncs of a commit on the reference machine
//     (p50 1.2-2.0 ms against 0.6-0.8 ms).
func boltOptions() *bbolt.Options {
	return &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}
}

// ErrInUse means another process holds the data directory's raft.db: a node
// already runs on it.
var ErrInUse = errors.New("in use by another process")

// openLog checks the log's file whole (CheckLog), then opens it. A file
// another process holds is ErrInUse, a damaged one CheckLog's error, and a
// failure to open it is opened's (the caller's words for it).
func openLog(path string, noSync bool, opened func(error) error) (*raftboltdb.BoltStore, error) {
	if err := CheckLog(path); err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, ErrInUse
		}
		return nil, err
	}
	logStore, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: boltOptions(), NoSync: noSync})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, ErrInUse
	case err != nil:
		return nil, opened(err)
	}
	return logStore, nil
}

// Stores are the Raft stores of a data directory, opened and checked.
type Stores struct {
	// Log is raft.db: the log and the stable store.
	Log       *raftboltdb.BoltStore
	Snapshots raft.SnapshotStore
	// HasState says whether they hold Raft state.
	HasState bool
}

// Options say where a node's stores are and how to open them.
type Options struct {
	DataDir, SnapshotDir string
	NoSync               bool // do not fsync the log (tests)
	RaftLogger           hclog.Logger
	Logger               *slog.Logger
	// SnapshotWritten, when not nil, is told how long each snapshot took
	// to write and how large it is.
	SnapshotWritten func(took time.Duration, bytes int64)
}

// Open opens the Raft log and stable store (raft.db, checked whole first)
// and the snapshot store (its snapshots checked against the log), and says
// whether they hold state.
func Open(o Options) (*Stores, error) {
	logStore, err := openLog(filepath.Join(o.DataDir, "raft.db"), o.NoSync, func(err error) error {
		return fmt.Errorf("cluster: open raft log in %s: %w", o.DataDir, err)
	})
	if errors.Is(err, ErrInUse) {
		return nil, fmt.Errorf("cluster: data directory %s is in use by another process (a node already runs on it)", o.DataDir)
	}
	if err != nil {
		return nil, err
	}
	fileSnapshots, err := raft.NewFileSnapshotStoreWithLogger(o.SnapshotDir, 2, o.RaftLogger)
	if err != nil {
		logStore.Close()
		return nil, fmt.Errorf("cluster: open snapshot store in %s: %w", o.SnapshotDir, err)
	}
	snapshots := NewPacedSnapshotStore(o.SnapshotDir, fileSnapshots, o.SnapshotWritten)
	if err := CheckSnapshots(snapshots, logStore, o.SnapshotDir, o.Logger); err != nil {
		logStore.Close()
		return nil, err
	}
	hasState, err := raft.HasExistingState(logStore, logStore, snapshots)
	if err != nil {
		logStore.Close()
		return nil, fmt.Errorf("cluster: inspect existing state: %w", err)
	}
	return &Stores{Log: logStore, Snapshots: snapshots, HasState: hasState}, nil
}
