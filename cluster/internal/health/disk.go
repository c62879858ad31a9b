package health

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// DiskProbeEvery is how often a node checks that it can write to its data
// directory.
const DiskProbeEvery = 5 * time.Second

// diskProbeFile is the file the probe writes and syncs, in the data
// directory.
const diskProbeFile = ".write-probe"

// diskProbeBytes is how much the probe writes: a fresh file of this size
// needs space of its own while the last one still holds its blocks, so the
// write fails on a full disk (rewriting a small file in place reuses its
// blocks and succeeded there). It is about what the log's store asks for
// when it grows.
const diskProbeBytes = 64 << 10

// Disk is what the disk probe last found of a data directory. Probe
// writes and syncs a file in it, every DiskProbeEvery, so that a node whose
// disk is full or gone says it is not ready between appends
// (raftstore.AppendWatch sees a failed append at once).
type Disk struct {
	dir    string
	logger *slog.Logger

	mu  sync.Mutex
	err error // the last probe's failure, or nil
}

// NewDisk returns the probe of the data directory dir, which has not
// failed yet.
func NewDisk(dir string, logger *slog.Logger) *Disk {
	return &Disk{dir: dir, logger: logger}
}

// Probe probes the directory and records the outcome, logging a change.
func (d *Disk) Probe() {
	err := probeDisk(d.dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil && d.err == nil {
		d.logger.Error("cannot write to the data directory; this node says it is not ready until it can", "dir", d.dir, "err", err)
	}
	if err == nil && d.err != nil {
		d.logger.Info("the data directory is writable again", "dir", d.dir)
	}
	d.err = err
}

// Err is the last probe's failure, or nil.
func (d *Disk) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// probeDisk writes a new probe file beside the last one, syncs it and
// renames it over the last.
func probeDisk(dir string) error {
	path := filepath.Join(dir, diskProbeFile)
	f, err := os.OpenFile(path+".new", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	block := make([]byte, diskProbeBytes)
	copy(block, time.Now().Format(time.RFC3339Nano))
	_, werr := f.Write(block)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(path + ".new")
		return err
	}
	return os.Rename(path+".new", path)
}
