// Package guard hardens a listener against what a hostile or unlucky client
// can do to it: a full file-descriptor table does not stop it (accept errors
// are retried with back-off, as net/http does), the connections open at
// once are capped (one over the cap is closed at once), and a connection
// that stays silent for too long is closed.
package guard

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Back-off after a failed Accept, doubling from the first to the last.
const (
	firstAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff   = time.Second
	// refusalLogEvery bounds how often refusals are logged.
	refusalLogEvery = 10 * time.Second
)

// Listener is a net.Listener whose Accept survives temporary failures and
// whose connections are capped and closed when idle.
type Listener struct {
	net.Listener
	maxConns int64
	idle     time.Duration
	logger   *slog.Logger

	open     atomic.Int64
	mu       sync.Mutex
	loggedAt time.Time
	refused  int
}

// Wrap returns ln guarded: at most maxConns connections open at once (0: no
// cap), each closed after idle without a byte read (0: never).
func Wrap(ln net.Listener, maxConns int, idle time.Duration, logger *slog.Logger) *Listener {
	if logger == nil {
		logger = slog.Default()
	}
	return &Listener{Listener: ln, maxConns: int64(maxConns), idle: idle, logger: logger}
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
		if l.maxConns > 0 && l.open.Load() >= l.maxConns {
			conn.Close()
			l.note("refused a connection: at the cap of open connections", "max", l.maxConns, "remote", conn.RemoteAddr().String())
			continue
		}
		l.open.Add(1)
		return &guardedConn{Conn: conn, l: l}, nil
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
// listener's idle duration (or at the read deadline set, if earlier), and
// closing it frees its place.
type guardedConn struct {
	net.Conn
	l        *Listener
	closed   atomic.Bool
	mu       sync.Mutex
	deadline time.Time // the read deadline set by the user of the conn
}

func (c *guardedConn) Read(p []byte) (int, error) {
	if c.l.idle > 0 {
		d := time.Now().Add(c.l.idle)
		c.mu.Lock()
		if !c.deadline.IsZero() && c.deadline.Before(d) {
			d = c.deadline
		}
		c.mu.Unlock()
		_ = c.Conn.SetReadDeadline(d)
	}
	return c.Conn.Read(p)
}

// SetReadDeadline sets a read deadline; reads still end after the idle
// duration when that comes first.
func (c *guardedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets the read and write deadlines.
func (c *guardedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *guardedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
	}
	return c.Conn.Close()
}
