package transport

import (
	"crypto/tls"
	"errors"
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
// inside it. The hello follows the byte (hello.go): a dialer of another
// cluster is refused before its connection reaches a protocol. Refusals are
// logged once per peer and kind every refusalLogEvery, with a count.
type Mux struct {
	ln net.Listener
	// dead is set when the accept loop ended while the listener was open.
	dead     atomic.Bool
	closing  atomic.Bool
	tls      *TLS
	cluster  Identity
	subs     map[Protocol]*subListener
	logger   *slog.Logger
	refusals *throttle
	// foreign is the latest dialer of another cluster refused (*foreignDial).
	foreign atomic.Pointer[foreignDial]
	wg      sync.WaitGroup
}

// foreignDial is a refused dialer of another cluster.
type foreignDial struct {
	cluster string
	at      time.Time
}

// NewMux starts accepting on ln for protocols, as a node of cluster.
func NewMux(ln net.Listener, t *TLS, cluster Identity, logger *slog.Logger, protocols ...Protocol) *Mux {
	m := &Mux{ln: ln, tls: t, cluster: cluster, subs: make(map[Protocol]*subListener), logger: logger, refusals: newThrottle(logger)}
	for _, p := range protocols {
		m.subs[p] = &subListener{addr: ln.Addr(), conns: make(chan net.Conn), closed: make(chan struct{})}
	}
	m.wg.Go(m.serve)
	return m
}

// Listener returns the connections of protocol.
func (m *Mux) Listener(protocol Protocol) net.Listener { return m.subs[protocol] }

// ForeignDialer returns the cluster ID of the latest dialer this mux
// refused for belonging to another cluster, if that was within the last
// within: nodes of another cluster dialing this one means they count this
// node's address as one of theirs.
func (m *Mux) ForeignDialer(within time.Duration) (cluster string, ok bool) {
	f := m.foreign.Load()
	if f == nil || time.Since(f.at) > within {
		return "", false
	}
	return f.cluster, true
}

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
			// No TLS at all: tls hands the connection back, having read
			// what the peer sent (of which the record header is kept), so
			// an HTTP request is answered on its first bytes.
			var plain tls.RecordHeaderError
			if errors.As(err, &plain) && plain.Conn != nil {
				if startsWithMethod(plain.RecordHeader[:]) {
					wrongPort(plain.Conn)
					m.refusals.warn("http", conn.RemoteAddr(), wrongPortLog)
					return
				}
				plain.Conn.Close()
			}
			m.refusals.warn("tls", conn.RemoteAddr(), "transport: refused a connection on the raft port: its TLS handshake failed", "err", shortError(err))
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
	sub := m.subs[Protocol(header[0])]
	if sub == nil {
		if startsWithMethod(header[:]) && answerHTTP(conn, header[:]) {
			m.refusals.warn("http", conn.RemoteAddr(), wrongPortLog)
			return
		}
		m.refusals.warn("protocol", conn.RemoteAddr(), "transport: refused a connection on the raft port: it names no protocol of this node", "byte", header[0])
		conn.Close()
		return
	}
	local := m.cluster.get()
	remote, ok, err := answerHello(conn, local)
	_ = conn.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		m.refusals.warn("hello", conn.RemoteAddr(), "transport: refused a connection on the raft port", "err", shortError(err))
		conn.Close()
		return
	case !ok:
		m.foreign.Store(&foreignDial{cluster: remote, at: time.Now()})
		m.refusals.warn("cluster", conn.RemoteAddr(), "transport: refused a node of another cluster", "cluster_id", local, "remote_cluster_id", remote)
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

// maxLoggedError bounds the text of an error in a refusal's log line: a
// TLS library's error may quote what the peer sent.
const maxLoggedError = 200

// shortError is err's text, cut to maxLoggedError bytes.
func shortError(err error) string {
	s := err.Error()
	if len(s) > maxLoggedError {
		s = s[:maxLoggedError] + "..."
	}
	return s
}
