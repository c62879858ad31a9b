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

// watchDisk writes and syncs a small file in the data directory every
// diskProbeEvery, so that a node whose disk is full or gone says it is not
// ready (Raft only logs that it cannot append, and a follower that cannot is
// otherwise indistinguishable from one that is idle).
func (n *Node) watchDisk() {
	ticker := time.NewTicker(diskProbeEvery)
	defer ticker.Stop()
	for {
		n.setDiskErr(probeDisk(n.cfg.DataDir))
		select {
		case <-n.stopCh:
			return
		case <-ticker.C:
		}
	}
}

func probeDisk(dir string) error {
	path := filepath.Join(dir, diskProbeFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte(time.Now().Format(time.RFC3339Nano)))
	serr := f.Sync()
	cerr := f.Close()
	return errors.Join(werr, serr, cerr)
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
