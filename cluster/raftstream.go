package cluster

import (
	"net"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/internal/transport"
)

// The Raft address carries two protocols, told apart by the first byte a
// dialer sends (package transport's mux): Raft's own RPCs, and limitnode's
// forwarding of requests from followers to the leader. One listening
// address per node keeps the operator's configuration to the two addresses
// of the contract.
const (
	protocolRaft    transport.Protocol = 'R'
	protocolForward transport.Protocol = 'F'
)

// DialFunc opens a TCP connection to another node's Raft address
// (Config.Dial; tests put a network that can fail in between).
type DialFunc = transport.DialFunc

// raftStream is the raft.StreamLayer over the mux's Raft sub-listener.
type raftStream struct {
	net.Listener
	advertise advertisedAddr
	dialer    transport.Dialer
}

// advertisedAddr is a node's Raft address as the others dial it, which may
// be a DNS name rather than the IP listened on.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

var _ raft.StreamLayer = (*raftStream)(nil)

func (s *raftStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.dialer.Open(string(addr), protocolRaft, timeout)
}

func (s *raftStream) Addr() net.Addr { return s.advertise }
