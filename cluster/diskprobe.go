package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"time"
)

// diskProbeEvery is how often a node checks that it can write to its data
// directory.
const diskProbeEvery = 5 * time.Second

// diskProbeFile is the file the probe writes and syncs, in the data
// directory.
const diskProbeFile = ".write-probe"

// diskProbeBytes is how much the probe writes: a fresh file of this size
// needs space of its own while the last one still holds its blocks, so the
// write fails on a full disk (rewriting a small file in place reuses its
// blocks and succeeded there). It is about what the log's store asks for
// when it grows.
const diskProbeBytes = 64 << 10

// watchDisk writes and syncs a file in the data directory every
// diskProbeEvery, so that a node whose disk is full or gone says it is not
// ready between appends (appendwatch.go sees a failed append at once).
func (n *Node) watchDisk() {
	probe := func() { n.setDiskErr(probeDisk(n.cfg.DataDir)) }
	probe()
	onEachTick(n.stopCh, diskProbeEvery, probe)
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

func (n *Node) setDiskErr(err error) {
	n.diskMu.Lock()
	defer n.diskMu.Unlock()
	if err != nil && n.diskErrV == nil {
		n.logger.Error("cannot write to the data directory; this node says it is not ready until it can", "dir", n.cfg.DataDir, "err", err)
	}
	if err == nil && n.diskErrV != nil {
		n.logger.Info("the data directory is writable again", "dir", n.cfg.DataDir)
	}
	n.diskErrV = err
}

func (n *Node) diskErr() error {
	n.diskMu.Lock()
	defer n.diskMu.Unlock()
	return n.diskErrV
}
