// Package guard hardens a listener against what a hostile or unlucky client
// can do to it: a full file-descriptor table does not stop it (accept errors
// are retried with back-off, as net/http does), the connections open at
// once are capped in all and per client address (one over a cap is closed
// at once, but see ShedIdle), and a connection that stays silent for too
// long is closed, sooner while it has not proven its caller (see Trust).
package guard

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitnode/limitnode/internal/clientip"
)

// Back-off after a failed Accept, doubling from the first to the last.
const (
	firstAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff   = time.Second
	// refusalLogEvery bounds how often refusals are logged.
	refusalLogEvery = 10 * time.Second
	// shedGrace is how long after its last byte, or the end of its last
	// request, a connection is not idle enough to close to make room: a
	// request may be on its way, read but not yet handed to its server.
	shedGrace = time.Second
	// shedSample bounds the connections looked at to find one to close:
	// making room costs the same at any count, and holds the listener's
	// lock for microseconds, not the milliseconds of 10,000.
	shedSample = 256
)

// Limits are what a Listener allows. The zero value allows everything.
type Limits struct {
	// MaxConns caps the connections open at once (0: no cap).
	MaxConns int
	// MaxConnsPerClient caps the connections open at once from one client
	// address (0: no cap); an IPv6 address counts with its /64 (see
	// clientip.Group).
	MaxConnsPerClient int
	// Idle closes a connection after this long without a byte read (0:
	// never).
	Idle time.Duration
	// UntrustedIdle, when set, is the idle time of a connection until
	// Trust is called for it: a connection that has not proven its caller
	// cannot sit on a place for as long as one that has.
	UntrustedIdle time.Duration
	// ShedIdle makes a connection over MaxConns close an idle one instead
	// of being refused: the one idle longest among those of the client
	// address that holds the most (so that connections kept idle, from one
	// address or many, cannot lock a new client out for their idle time).
	// Idle is no request under way, as the server reports it (ConnState,
	// Serving), and nothing read for shedGrace. Only with every place taken
	// by requests under way is a new connection refused. Set it only where
	// the server reports its requests.
	ShedIdle bool
}

// Listener is a net.Listener whose Accept survives temporary failures and
// whose connections are capped and closed when idle.
type Listener struct {
	net.Listener
	limits Limits
	logger *slog.Logger

	open      atomic.Int64
	epoch     time.Time // what guardedConn.activeAt counts from
	mu        sync.Mutex
	perClient map[netip.Addr]int      // open connections by clientOf
	inFlight  map[netip.Addr]int      // requests under way by clientOf (see Begin)
	byRemote  map[string]*guardedConn // open TCP connections by remote address
	loggedAt  time.Time
	refused   int
}

// Wrap returns ln guarded: at most maxConns connections open at once (0: no
// cap), each closed after idle without a byte read (0: never).
func Wrap(ln net.Listener, maxConns int, idle time.Duration, logger *slog.Logger) *Listener {
	return New(ln, Limits{MaxConns: maxConns, Idle: idle}, logger)
}

// New returns ln guarded by limits.
func New(ln net.Listener, limits Limits, logger *slog.Logger) *Listener {
	if logger == nil {
		logger = slog.Default()
	}
	return &Listener{Listener: ln, limits: limits, logger: logger, epoch: time.Now(),
		perClient: map[netip.Addr]int{}, inFlight: map[netip.Addr]int{}, byRemote: map[string]*guardedConn{}}
}

// since is the monotonic time since the listener was made, in nanoseconds.
func (l *Listener) since() int64 { return int64(time.Since(l.epoch)) }

// Begin takes a place for a request from remoteAddr (as Trust reads it)
// among the requests under way from its client address, capped at
// Limits.MaxConnsPerClient: over HTTP/1.1 a connection carries one request
// at a time, so the connection cap bounds them already, but one HTTP/2 or
// gRPC connection carries hundreds, each holding its headers and a
// goroutine. ok is false at the cap; otherwise end gives the place back.
// An address that is not IP:port, or no cap, takes no place.
func (l *Listener) Begin(remoteAddr string) (end func(), ok bool) {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil || l.limits.MaxConnsPerClient <= 0 {
		return func() {}, true
	}
	client := clientip.Group(ap.Addr())
	l.mu.Lock()
	full := l.inFlight[client] >= l.limits.MaxConnsPerClient
	if !full {
		l.inFlight[client]++
	}
	l.mu.Unlock()
	if full {
		l.note("refused a request: at the cap of requests under way from one client address", "max_per_client", l.limits.MaxConnsPerClient, "remote", remoteAddr)
		return nil, false
	}
	served := l.Serving(remoteAddr)
	var once sync.Once
	return func() {
		once.Do(func() {
			served()
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.inFlight[client]--; l.inFlight[client] <= 0 {
				delete(l.inFlight, client)
			}
		})
	}, true
}

// Serving marks the open connection from remoteAddr (as Trust reads it) as
// carrying one more request, until done is called, so that ShedIdle never
// closes it: a gRPC server reports each call so. An address with no open
// connection is ignored.
func (l *Listener) Serving(remoteAddr string) (done func()) {
	l.mu.Lock()
	c := l.byRemote[remoteAddr]
	l.mu.Unlock()
	if c == nil {
		return func() {}
	}
	c.requests.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			c.activeAt.Store(l.since())
			c.requests.Add(-1)
		})
	}
}

// ConnState is an http.Server's ConnState: it follows whether each
// connection has a request under way (an HTTP/2 connection is active while
// it has a stream), so that ShedIdle never closes one that has.
func (l *Listener) ConnState(conn net.Conn, state http.ConnState) {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	c, ok := conn.(*guardedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateActive:
		c.serving.Store(true)
	case http.StateIdle:
		c.activeAt.Store(l.since())
		c.serving.Store(false)
	}
}

// Trust marks the open connection from remoteAddr (its RemoteAddr's
// String, as net/http's Request.RemoteAddr and gRPC's peer give it) as
// having proven its caller: from now on it idles for Limits.Idle, not
// UntrustedIdle. An address with no open connection is ignored.
func (l *Listener) Trust(remoteAddr string) {
	l.mu.Lock()
	c := l.byRemote[remoteAddr]
	l.mu.Unlock()
	if c != nil {
		c.trusted.Store(true)
		// A read may be waiting under the untrusted idle time already (net/http
		// reads in the background while a handler runs): give it the trusted one.
		c.mu.Lock()
		if c.capped {
			c.applyDeadline()
		}
		c.mu.Unlock()
	}
}

// clientOf is the address a connection from remote counts against in
// MaxConnsPerClient (see clientip.Group). ok is false for an address that
// is not TCP (a test's pipe).
func clientOf(remote net.Addr) (netip.Addr, bool) {
	tcp, ok := remote.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	return clientip.Group(tcp.AddrPort().Addr()), true
}

// admit takes a place for conn, or says which cap it is over. At MaxConns
// with ShedIdle, it first closes the idlest connection (see idlest).
func (l *Listener) admit(conn net.Conn) (*guardedConn, string) {
	client, counted := clientOf(conn.RemoteAddr())
	g := &guardedConn{Conn: conn, l: l, client: client, counted: counted}
	g.activeAt.Store(l.since())
	if l.limits.MaxConns > 0 && l.open.Load() >= int64(l.limits.MaxConns) {
		if !l.limits.ShedIdle {
			return nil, "refused a connection: at the cap of open connections"
		}
		l.mu.Lock()
		if counted && l.limits.MaxConnsPerClient > 0 && l.perClient[client] >= l.limits.MaxConnsPerClient {
			l.mu.Unlock()
			return nil, "refused a connection: at the cap of open connections from one client address"
		}
		victim := l.idlest()
		l.mu.Unlock()
		if victim == nil {
			return nil, "refused a connection: at the cap of open connections, every one with a request under way"
		}
		victim.Close()
		l.note("closed the connection idle longest to make room for a new one: at the cap of open connections",
			"max", l.limits.MaxConns, "closed", victim.RemoteAddr().String(), "remote", conn.RemoteAddr().String())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if counted {
		if l.limits.MaxConnsPerClient > 0 && l.perClient[client] >= l.limits.MaxConnsPerClient {
			return nil, "refused a connection: at the cap of open connections from one client address"
		}
		l.perClient[client]++
		l.byRemote[conn.RemoteAddr().String()] = g
	}
	l.open.Add(1)
	return g, ""
}

// idlest returns the connection to close to make room: among those with no
// request under way and nothing read for shedGrace, one of the client
// address that holds the most connections, the one idle longest; nil when
// it finds none. Connections of one address are what fills a listener, and
// the oldest idle one is the least likely to be used again. It looks at
// shedSample connections at most, from a random place (Go's map order), as
// Redis samples for its LRU: where idle connections are a handful among
// thousands busy, it may find none, and the new connection is refused. The
// caller holds mu.
func (l *Listener) idlest() *guardedConn {
	var victim *guardedConn
	var victimHolds int
	var victimAt int64
	now := l.since()
	looked := 0
	for _, c := range l.byRemote {
		if looked++; looked > shedSample {
			break
		}
		at := c.activeAt.Load()
		if c.serving.Load() || c.requests.Load() > 0 || now-at < int64(shedGrace) || c.closed.Load() {
			continue
		}
		holds := l.perClient[c.client]
		if victim == nil || holds > victimHolds || holds == victimHolds && at < victimAt {
			victim, victimHolds, victimAt = c, holds, at
		}
	}
	return victim
}

// release gives back the place of a closed connection.
func (l *Listener) release(c *guardedConn) {
	l.open.Add(-1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.counted {
		if l.perClient[c.client]--; l.perClient[c.client] <= 0 {
			delete(l.perClient, c.client)
		}
		if remote := c.RemoteAddr().String(); l.byRemote[remote] == c {
			delete(l.byRemote, remote)
		}
	}
}

// Accept returns the next connection. A failure other than the listener's
// closing (too many open files, a connection reset before it was accepted)
// is retried after a back-off; only a closed listener ends it.
func (l *Listener) Accept() (net.Conn, error) {
	backoff := time.Duration(0)
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			backoff = min(max(2*backoff, firstAcceptBackoff), maxAcceptBackoff)
			l.note("accept failed; retrying", "err", err, "backoff", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		g, refusal := l.admit(conn)
		if g == nil {
			conn.Close()
			l.note(refusal, "max", l.limits.MaxConns, "max_per_client", l.limits.MaxConnsPerClient, "remote", conn.RemoteAddr().String())
			continue
		}
		return g, nil
	}
}

// Open returns how many accepted connections are open.
func (l *Listener) Open() int64 { return l.open.Load() }

// note logs a refusal or a failure at most once per refusalLogEvery, with
// the count of those not logged.
func (l *Listener) note(msg string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.loggedAt) < refusalLogEvery {
		l.refused++
		return
	}
	if l.refused > 0 {
		args = append(args, "repeats_suppressed", l.refused)
	}
	l.loggedAt, l.refused = time.Now(), 0
	l.logger.Warn(msg, append(args, "addr", l.Addr().String())...)
}

// guardedConn is an accepted connection: a read times out after the
// listener's idle duration for it (or at the read deadline set, if
// earlier), and closing it frees its place.
type guardedConn struct {
	net.Conn
	l       *Listener
	client  netip.Addr // what it counts against, when counted (a TCP connection)
	counted bool
	trusted atomic.Bool
	closed  atomic.Bool
	// serving (an HTTP request under way, see ConnState) and requests
	// (calls under way, see Serving) keep ShedIdle from closing it;
	// activeAt is when it last read a byte or ended a request (Listener.since).
	serving  atomic.Bool
	requests atomic.Int32
	activeAt atomic.Int64

	mu       sync.Mutex
	deadline time.Time // the read deadline set by the user of the conn
	capped   bool      // the conn's deadline is the idle one, not the user's
}

// idle is how long a read may wait for a byte: Limits.Idle, or
// UntrustedIdle (when shorter) until the connection is trusted.
func (c *guardedConn) idle() time.Duration {
	idle, untrusted := c.l.limits.Idle, c.l.limits.UntrustedIdle
	if untrusted > 0 && !c.trusted.Load() && (idle == 0 || untrusted < idle) {
		return untrusted
	}
	return idle
}

func (c *guardedConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.capped || c.idle() > 0 {
		c.applyDeadline()
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.activeAt.Store(c.l.since())
	}
	return n, err
}

// applyDeadline sets the conn's read deadline to the idle time from now, or
// the user's deadline when that is earlier or there is no idle time. The
// caller holds mu.
func (c *guardedConn) applyDeadline() {
	d := c.deadline
	if idle := c.idle(); idle > 0 {
		if limit := time.Now().Add(idle); d.IsZero() || limit.Before(d) {
			d = limit
		}
		c.capped = true
	} else {
		c.capped = false
	}
	_ = c.Conn.SetReadDeadline(d)
}

// SetReadDeadline sets a read deadline; reads still end after the idle
// duration when that comes first.
func (c *guardedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets the read and write deadlines.
func (c *guardedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return c.Conn.SetDeadline(t)
}

func (c *guardedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c)
	}
	return c.Conn.Close()
}
