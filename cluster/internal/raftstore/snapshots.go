package raftstore

import (
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
)

// snapshotSyncEvery is how much of a snapshot may be written before it is
// synced to disk.
const snapshotSyncEvery = 4 << 20

// PacedSnapshotStore is Raft's file snapshot store, with snapshots synced
// to disk every snapshotSyncEvery bytes as they are written instead of all
// at once when they close. The log's appends share the disk: one fsync of a
// 40 MB file held them up for tens of milliseconds, several small ones
// leave room between them.
type PacedSnapshotStore struct {
	*raft.FileSnapshotStore
	dir     string // where the store keeps its snapshots
	written func(took time.Duration, bytes int64)
}

// NewPacedSnapshotStore paces store, which keeps its snapshots under
// dataDir; written, when not nil, is told how long each snapshot took to
// write and how large it is.
func NewPacedSnapshotStore(dataDir string, store *raft.FileSnapshotStore, written func(took time.Duration, bytes int64)) *PacedSnapshotStore {
	return &PacedSnapshotStore{FileSnapshotStore: store, dir: filepath.Join(dataDir, "snapshots"), written: written}
}

// Create starts a snapshot; see raft.FileSnapshotStore.Create.
func (s *PacedSnapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	// The file store writes a snapshot to <id>.tmp/state.bin and renames
	// the directory when it closes; if that ever changes, the file is not
	// found and the snapshot is synced only at the end, as before.
	return &pacedSink{SnapshotSink: sink, path: filepath.Join(s.dir, sink.ID()+".tmp", "state.bin"), done: s.written, start: time.Now()}, nil
}

// pacedSink syncs the file under a snapshot sink as it grows.
type pacedSink struct {
	raft.SnapshotSink
	path            string
	file            *os.File // a second descriptor of the sink's file, for syncing
	written, synced int64
	done            func(took time.Duration, bytes int64) // the store's written
	start           time.Time
}

func (p *pacedSink) Write(b []byte) (int, error) {
	n, err := p.SnapshotSink.Write(b)
	p.written += int64(n)
	if err == nil && p.written-p.synced >= snapshotSyncEvery {
		p.sync()
	}
	return n, err
}

// sync flushes what the sink's file holds so far. A failure here is left to
// the sink's own sync when it closes, which reports it.
func (p *pacedSink) sync() {
	p.synced = p.written
	if p.file == nil {
		f, err := os.Open(p.path)
		if err != nil {
			p.path = "" // not where the file store used to put it: stop trying
			return
		}
		p.file = f
	}
	_ = p.file.Sync()
}

func (p *pacedSink) release() {
	if p.file != nil {
		p.file.Close()
		p.file = nil
	}
}

// Close finishes the snapshot; see raft.SnapshotSink.
func (p *pacedSink) Close() error {
	p.release()
	err := p.SnapshotSink.Close()
	if err == nil && p.done != nil {
		p.done(time.Since(p.start), p.written)
	}
	return err
}

// Cancel abandons the snapshot; see raft.SnapshotSink.
func (p *pacedSink) Cancel() error {
	p.release()
	return p.SnapshotSink.Cancel()
}
