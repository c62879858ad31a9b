package rafttransport

import (
	"errors"
	"sync"

	"github.com/hashicorp/raft"
)

// Raft handles a heartbeat on the transport goroutine that read it, not on
// its own (NetworkTransport's heartbeat fast path), and a heartbeat of a
// newer term saves the term in the stable store. raft.Shutdown waits for
// Raft's goroutines only, so a heartbeat still being handled when it
// returns would write to stores the node then closes, and Raft panics on
// that write ("failed to save current term: database not open"): the
// leader a stopping node just handed over to sends it exactly such
// heartbeats. GatedTransport lets heartbeats reach Raft only through a gate
// that shutdown closes, and closing waits for those under way, so the
// stores close only once no goroutine but Raft's own can reach them.

// errNodeClosing answers a heartbeat that arrives once the node closes.
var errNodeClosing = errors.New("transport: the node is shutting down")

// GatedTransport is the Raft transport of a node: NetworkTransport, with
// its heartbeat handler behind a gate.
type GatedTransport struct {
	*raft.NetworkTransport

	mu     sync.RWMutex // held for reading by each heartbeat under way
	closed bool
}

var _ raft.Transport = (*GatedTransport)(nil)

// SetHeartbeatHandler installs Raft's handler behind the gate.
func (t *GatedTransport) SetHeartbeatHandler(handle func(rpc raft.RPC)) {
	if handle == nil {
		t.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		t.mu.RLock()
		defer t.mu.RUnlock()
		if t.closed {
			rpc.Respond(nil, errNodeClosing)
			return
		}
		handle(rpc)
	})
}

// CloseGate stops heartbeats from reaching Raft, once those under way
// have been handled.
func (t *GatedTransport) CloseGate() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}
