package transport

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// headerTimeout bounds how long an accepted connection may take to send its
// protocol byte, so that a silent client cannot hold a goroutine forever.
const headerTimeout = 5 * time.Second

// Mux accepts connections on one listener and hands each to the
// sub-listener of the protocol named by its first byte (as rqlite does), so
// that one address per node carries every protocol. With TLS set, a
// connection first completes a mutual TLS handshake, and the byte is read
// inside it.
type Mux struct {
	ln net.Listener
	// dead is set when the accept loop ended while the listener was open.
	dead    atomic.Bool
	closing atomic.Bool
	tls     *TLS
	subs    map[Protocol]*subListener
	logger  *slog.Logger
	wg      sync.WaitGroup
}

// NewMux starts accepting on ln for protocols.
func NewMux(ln net.Listener, t *TLS, logger *slog.Logger, protocols ...Protocol) *Mux {
	m := &Mux{ln: ln, tls: t, subs: make(map[Protocol]*subListener), logger: logger}
	for _, p := range protocols {
		m.subs[p] = &subListener{addr: ln.Addr(), conns: make(chan net.Conn), closed: make(chan struct{})}
	}
	m.wg.Go(m.serve)
	return m
}

// Listener returns the connections of protocol.
func (m *Mux) Listener(protocol Protocol) net.Listener { return m.subs[protocol] }

// Failed reports whether the accept loop ended without Close.
func (m *Mux) Failed() bool { return m.dead.Load() }

func (m *Mux) serve() {
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			if !m.closing.Load() {
				m.dead.Store(true)
				m.logger.Error("transport: the raft port stopped accepting connections", "err", err)
			}
			return
		}
		m.wg.Go(func() { m.route(conn) })
	}
}

func (m *Mux) route(conn net.Conn) {
	if m.tls != nil {
		tc := tls.Server(conn, m.tls.serverConfig())
		if err := handshake(tc, headerTimeout); err != nil {
			m.logger.Warn("transport: refused a connection on the raft port", "err", err)
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
	sub := m.subs[Protocol(header[0])]
	if sub == nil {
		m.logger.Warn("transport: unknown protocol on the raft port", "byte", header[0], "remote", conn.RemoteAddr().String())
		conn.Close()
		return
	}
	select {
	case sub.conns <- conn:
	case <-sub.closed:
		conn.Close()
	}
}

// Close stops accepting, closes every sub-listener and waits for routing
// goroutines to finish.
func (m *Mux) Close() error {
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
