package raftstore

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A node that cannot append to its log (a full disk, a disk gone
// read-only) takes no part in the cluster's progress, yet Raft only logs it:
// the node still knows the leader and has applied what it knows to be
// committed, so it would say it is ready and serve stale reads. The log
// store is watched instead: a failed append makes the node say, in Ready,
// that it cannot append, until an append succeeds again. (The disk probe,
// cluster/internal/health's Disk, finds the same from outside Raft, between appends.)

// AppendWatch is the log store as Raft sees it: it remembers whether the
// latest append failed. Tests can make appends fail or hang through
// internal/testhooks (BreakAppends), as a full or a stuck disk would.
type AppendWatch struct {
	raft.LogStore

	mu       sync.Mutex
	failure  error     // the latest append's error, or nil
	failedAt time.Time // when it first failed in a row
	// broken, when set, is what every append returns instead of writing;
	// stalled holds every append until it is closed.
	broken  error
	stalled chan struct{}
}

func (w *AppendWatch) StoreLog(l *raft.Log) error {
	return w.StoreLogs([]*raft.Log{l})
}

func (w *AppendWatch) StoreLogs(logs []*raft.Log) error {
	w.mu.Lock()
	stalled, broken := w.stalled, w.broken
	w.mu.Unlock()
	if stalled != nil {
		<-stalled
	}
	err := broken
	if err == nil {
		err = w.LogStore.StoreLogs(logs)
	}
	w.note(err)
	return err
}

func (w *AppendWatch) note(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil && w.failure == nil {
		w.failedAt = time.Now()
	}
	w.failure = err
}

// Failing says why the latest append failed, or "" when it did not.
func (w *AppendWatch) Failing() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failure == nil {
		return ""
	}
	return fmt.Sprintf("cannot append to the log (for %s): %v", time.Since(w.failedAt).Round(time.Second), w.failure)
}

// errBrokenByTest is the error of appends a test broke.
var errBrokenByTest = errors.New("no space left on device (a test broke this node's appends)")

// BreakAppends makes every append fail (fail), hang (stall), or, with
// neither, work again; it is testhooks.BreakAppends.
func (w *AppendWatch) BreakAppends(fail, stall bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.broken = nil
	if fail {
		w.broken = errBrokenByTest
	}
	if w.stalled != nil && !stall {
		close(w.stalled)
		w.stalled = nil
	}
	if stall && w.stalled == nil {
		w.stalled = make(chan struct{})
	}
}
