package cluster

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The Raft address carries two protocols, told apart by the first byte a
// dialer sends (as rqlite does): Raft's own RPCs, and limitnode's forwarding
// of requests from followers to the leader. One listening address per node
// keeps the operator's configuration to the two addresses of the contract.
const (
	protocolRaft    byte = 'R'
	protocolForward byte = 'F'
)

// headerTimeout bounds how long an accepted connection may take to send its
// protocol byte, so that a silent client cannot hold a goroutine forever.
const headerTimeout = 5 * time.Second

// mux accepts connections on one listener and hands each to the sub-listener
// of the protocol named by its first byte. With tls set, a connection first
// completes a mutual TLS handshake, and the byte is read inside it.
type mux struct {
	ln net.Listener
	// dead is set when the accept loop ended while the listener was open.
	dead    atomic.Bool
	closing atomic.Bool
	tls     *NodeTLS
	subs    map[byte]*subListener
	logger  *slog.Logger
	wg      sync.WaitGroup
}

func newMux(ln net.Listener, nodeTLS *NodeTLS, logger *slog.Logger, protocols ...byte) *mux {
	m := &mux{ln: ln, tls: nodeTLS, subs: make(map[byte]*subListener), logger: logger}
	for _, p := range protocols {
		m.subs[p] = &subListener{addr: ln.Addr(), conns: make(chan net.Conn), closed: make(chan struct{})}
	}
	m.wg.Go(m.serve)
	return m
}

func (m *mux) listener(protocol byte) net.Listener { return m.subs[protocol] }

// failed reports whether the accept loop ended without close.
func (m *mux) failed() bool { return m.dead.Load() }

func (m *mux) serve() {
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			if !m.closing.Load() {
				m.dead.Store(true)
				m.logger.Error("cluster: the raft port stopped accepting connections", "err", err)
			}
			return
		}
		m.wg.Go(func() { m.route(conn) })
	}
}

func (m *mux) route(conn net.Conn) {
	if m.tls != nil {
		tc := tls.Server(conn, m.tls.serverConfig())
		if err := handshake(tc, headerTimeout); err != nil {
			m.logger.Warn("cluster: refused a connection on the raft port", "err", err)
			return
		}
		conn = tc
	}
	var header [1]byte
	_ = conn.SetReadDeadline(time.Now().Add(headerTimeout))
	if _, err := io.ReadFull(conn, header[:]); err != nil {
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	sub := m.subs[header[0]]
	if sub == nil {
		m.logger.Warn("cluster: unknown protocol on the raft port", "byte", header[0], "remote", conn.RemoteAddr().String())
		conn.Close()
		return
	}
	select {
	case sub.conns <- conn:
	case <-sub.closed:
		conn.Close()
	}
}

// close stops accepting, closes every sub-listener and waits for routing
// goroutines to finish.
func (m *mux) close() error {
	m.closing.Store(true)
	err := m.ln.Close()
	for _, s := range m.subs {
		s.Close()
	}
	m.wg.Wait()
	return err
}

type subListener struct {
	addr      net.Addr
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func (s *subListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

func (s *subListener) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

func (s *subListener) Addr() net.Addr { return s.addr }

// DialFunc opens a TCP connection to another node's Raft address.
type DialFunc func(addr string, timeout time.Duration) (net.Conn, error)

func dialTCP(addr string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, timeout)
}

// dialer opens connections to other nodes' Raft addresses: over dial, then
// in mutual TLS when tls is set, then announcing the protocol.
type dialer struct {
	dial DialFunc
	tls  *NodeTLS
}

// open opens a connection to a node's Raft address for protocol.
func (d dialer) open(addr string, protocol byte, timeout time.Duration) (net.Conn, error) {
	conn, err := d.dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	if d.tls != nil {
		tc := tls.Client(conn, d.tls.clientConfig(addr))
		if err := handshake(tc, timeout); err != nil {
			return nil, err
		}
		conn = tc
	}
	_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte{protocol}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("announce protocol to %s: %w", addr, err)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

// raftStream is the raft.StreamLayer over the mux's Raft sub-listener.
type raftStream struct {
	net.Listener
	advertise advertisedAddr
	dialer    dialer
}

// advertisedAddr is a node's Raft address as the others dial it, which may
// be a DNS name rather than the IP listened on.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

var _ raft.StreamLayer = (*raftStream)(nil)

func (s *raftStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.dialer.open(string(addr), protocolRaft, timeout)
}

func (s *raftStream) Addr() net.Addr { return s.advertise }
