package rafttransport

import (
	"net"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/internal/transport"
)

// RaftStream is the raft.StreamLayer of a node: it accepts on the mux's
// Raft sub-listener, dials others' Raft protocol through Dialer, and gives
// its address as Advertise, the address the others dial (which may be a
// DNS name rather than the IP listened on).
type RaftStream struct {
	net.Listener
	Advertise string
	Dialer    transport.Dialer
}

var _ raft.StreamLayer = (*RaftStream)(nil)

// Dial opens a Raft connection to addr.
func (s *RaftStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.Dialer.Open(string(addr), transport.ProtocolRaft, timeout)
}

// Addr is the address the others dial.
func (s *RaftStream) Addr() net.Addr { return advertisedAddr(s.Advertise) }

// advertisedAddr is an address as the others dial it.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }
