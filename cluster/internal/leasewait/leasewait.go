// Package leasewait holds the lease requests waiting on a node for their
// queue's verdict: the node registers a request before it sends it, and
// the state machine delivers each verdict as it applies the entry that
// decides it, whichever node's caller caused it.
package leasewait

import (
	"sync"

	"github.com/limitnode/limitnode/fsm"
)

// Waiters are the lease requests waiting on a node for their queue's
// verdict, by ID.
type Waiters struct {
	mu       sync.Mutex
	verdicts map[string]chan fsm.LeaseResult
	// restored is closed, and replaced, when a snapshot replaces the
	// state: its entries' events were never applied here.
	restored chan struct{}
}

// New returns an empty set of waiters.
func New() *Waiters {
	return &Waiters{verdicts: map[string]chan fsm.LeaseResult{}, restored: make(chan struct{})}
}

// Add registers id, before its acquire is sent, so that no verdict can be
// applied before there is somewhere to put it. It returns the channel of
// verdicts and the restore signal of that moment.
func (w *Waiters) Add(id string) (verdicts <-chan fsm.LeaseResult, restored <-chan struct{}) {
	ch := make(chan fsm.LeaseResult, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.verdicts[id] = ch
	return ch, w.restored
}

// Remove forgets id.
func (w *Waiters) Remove(id string) {
	w.mu.Lock()
	delete(w.verdicts, id)
	w.mu.Unlock()
}

// Deliver hands an applied event to its waiter, if it waits here. It runs
// on the applying goroutine (the only sender) and never blocks: the channel
// holds the latest verdict, which replaces one not yet read (the verdict on
// an earlier place of the same ID).
func (w *Waiters) Deliver(ev fsm.LeaseEvent) {
	w.mu.Lock()
	ch := w.verdicts[ev.ID]
	w.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- ev.Result:
	default:
		select {
		case <-ch:
		default:
		}
		ch <- ev.Result
	}
}

// SignalRestored wakes every waiter to look at the restored state.
func (w *Waiters) SignalRestored() {
	w.mu.Lock()
	close(w.restored)
	w.restored = make(chan struct{})
	w.mu.Unlock()
}

// RestoredSignal is the restore signal of now.
func (w *Waiters) RestoredSignal() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.restored
}
