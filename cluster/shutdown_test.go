package cluster

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/cluster/internal/rafttransport"
)

// TestClosingWhileHeartbeatsArriveDoesNotPanic closes nodes while a peer
// sends them heartbeats of ever newer terms over the Raft port, as a new
// leader does to the node that handed leadership over and is stopping. Raft
// handles a heartbeat on the transport's goroutine, not its own, and one
// with a newer term saves the term in the stable store: a node that closed
// its stores while such a handler ran panicked ("failed to save current
// term: database not open"). Every round must close cleanly.
func TestClosingWhileHeartbeatsArriveDoesNotPanic(t *testing.T) {
	t.Parallel()
	const rounds, senders = 12, 6
	for round := range rounds {
		n, err := Open(Config{ID: "n1", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(), Bootstrap: true})
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); !n.IsLeader(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the node did not lead its own cluster")
			}
		}
		peer := heartbeatPeer(t, n, senders)
		var stop atomic.Bool
		var sent atomic.Int64
		var wg sync.WaitGroup
		for s := range senders {
			wg.Go(func() {
				for term := uint64(1000*round + 10 + s); !stop.Load(); term += senders {
					req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("n2"), Addr: []byte("127.0.0.1:1")}, Term: term}
					if peer.AppendEntries("n1", raft.ServerAddress(n.RaftAddr()), req, &raft.AppendEntriesResponse{}) == nil {
						sent.Add(1)
					}
				}
			})
		}
		for deadline := time.Now().Add(10 * time.Second); sent.Load() < 20; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no heartbeat got through")
			}
		}
		if err := n.Close(); err != nil {
			t.Errorf("round %d: close: %v", round, err)
		}
		stop.Store(true)
		wg.Wait()
		peer.Close()
	}
}

// heartbeatPeer is a Raft transport that dials n's Raft port as a member of
// n's cluster would, keeping up to conns connections to it, so that
// heartbeats sent at once reach n on as many of its transport goroutines.
func heartbeatPeer(t *testing.T, n *Node, conns int) *raft.NetworkTransport {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stream := &rafttransport.RaftStream{Listener: ln, Advertise: ln.Addr().String(), Dialer: n.fwd.dialer}
	return raft.NewNetworkTransport(stream, conns, time.Second, io.Discard)
}
