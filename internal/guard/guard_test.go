package guard

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"
)

// flakyListener fails its first Accepts as a full descriptor table does.
type flakyListener struct {
	net.Listener
	failures int
}

func (f *flakyListener) Accept() (net.Conn, error) {
	if f.failures > 0 {
		f.failures--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return f.Listener.Accept()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func TestAcceptSurvivesTooManyOpenFiles(t *testing.T) {
	t.Parallel()
	inner := listen(t)
	l := Wrap(&flakyListener{Listener: inner, failures: 3}, 0, 0, slog.New(slog.DiscardHandler))
	go func() {
		if c, err := net.Dial("tcp", inner.Addr().String()); err == nil {
			defer c.Close()
			_, _ = c.Write([]byte("x"))
		}
	}()
	conn, err := l.Accept()
	if err != nil {
		t.Fatalf("Accept gave up: %v", err)
	}
	conn.Close()
	inner.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a closed listener: %v", err)
	}
}

func TestConnectionsAreCappedAndIdleOnesClosed(t *testing.T) {
	t.Parallel()
	inner := listen(t)
	l := Wrap(inner, 2, 200*time.Millisecond, slog.New(slog.DiscardHandler))
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	// The third is over the cap: the server closes it at once.
	_ = clients[2].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := clients[2].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the connection over the cap: %v, want it closed", err)
	}
	// A silent client is cut off after the idle time.
	start := time.Now()
	if _, err := first.Read(make([]byte, 1)); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("an idle read: %v after %v", err, time.Since(start))
	}
	first.Close()
	second.Close()
	if l.Open() != 0 {
		t.Fatalf("%d open after closing both", l.Open())
	}
}

// acceptAll accepts from l until it closes, handing each connection on.
func acceptAll(l net.Listener) <-chan net.Conn {
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	return accepted
}

// dialFrom connects to addr from the local address from ("127.0.0.2").
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mustBeClosedAtOnce fails unless the server closed c without a byte.
func mustBeClosedAtOnce(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("%s: %v, want it closed", what, err)
	}
}

// TestOneClientAddressCannotTakeEveryPlace fills the per-client cap from
// 127.0.0.1: one more from it is closed at once, while 127.0.0.2 (another
// loopback address, counted as another client) is still accepted; once one
// of the first closes, 127.0.0.1 gets its place back.
func TestOneClientAddressCannotTakeEveryPlace(t *testing.T) {
	t.Parallel()
	inner := listen(t)
	l := New(inner, Limits{MaxConns: 10, MaxConnsPerClient: 2}, slog.New(slog.DiscardHandler))
	accepted := acceptAll(l)
	addr := inner.Addr().String()
	dialFrom(t, "127.0.0.1", addr)
	dialFrom(t, "127.0.0.1", addr)
	first, second := <-accepted, <-accepted
	mustBeClosedAtOnce(t, dialFrom(t, "127.0.0.1", addr), "a third connection from 127.0.0.1")
	other := dialFrom(t, "127.0.0.2", addr)
	if _, err := other.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := <-accepted; got.RemoteAddr().(*net.TCPAddr).IP.String() != "127.0.0.2" {
		t.Fatalf("accepted %s, want the connection from 127.0.0.2", got.RemoteAddr())
	}
	first.Close()
	dialFrom(t, "127.0.0.1", addr)
	if got := <-accepted; got.RemoteAddr().(*net.TCPAddr).IP.String() != "127.0.0.1" {
		t.Fatalf("accepted %s, want 127.0.0.1's again", got.RemoteAddr())
	}
	second.Close()
}

func TestAnIPv6ClientCountsWithItsSlash64(t *testing.T) {
	t.Parallel()
	tests := []struct{ remote, want string }{
		{"[2001:db8:1:2:aaaa::1]:4711", "2001:db8:1:2::"},
		{"[2001:db8:1:2:ffff::9%eth0]:80", "2001:db8:1:2::"},
		{"[::ffff:192.0.2.7]:80", "192.0.2.7"},
		{"192.0.2.7:80", "192.0.2.7"},
		{"[::1]:80", "::"},
	}
	for _, tt := range tests {
		ap := netip.MustParseAddrPort(tt.remote)
		got, ok := clientOf(net.TCPAddrFromAddrPort(ap))
		if !ok || got.String() != tt.want {
			t.Errorf("clientOf(%s) = %s, %v; want %s", tt.remote, got, ok, tt.want)
		}
	}
}

// TestAnUntrustedConnectionIdlesLess: a connection nobody trusted is cut
// off after UntrustedIdle; one trusted while a read waits keeps waiting
// (with no Idle of its own, for as long as its own deadline says).
func TestAnUntrustedConnectionIdlesLess(t *testing.T) {
	t.Parallel()
	inner := listen(t)
	l := New(inner, Limits{UntrustedIdle: 100 * time.Millisecond}, slog.New(slog.DiscardHandler))
	accepted := acceptAll(l)
	dialFrom(t, "127.0.0.1", inner.Addr().String())
	silent := <-accepted
	if _, err := silent.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("a silent untrusted connection: %v, want a timeout", err)
	}

	client := dialFrom(t, "127.0.0.1", inner.Addr().String())
	server := <-accepted
	read := make(chan error, 1)
	go func() { _, err := server.Read(make([]byte, 1)); read <- err }()
	l.Trust(server.RemoteAddr().String())
	// Wait well past the untrusted idle time, then send: the read gets it.
	select {
	case err := <-read:
		t.Fatalf("a trusted connection's read ended: %v", err)
	case <-time.After(time.Second):
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatalf("a trusted connection's read: %v", err)
	}
	server.Close()
	if l.Open() != 1 { // the silent one is still open: the server has not closed it
		t.Fatalf("%d open, want 1", l.Open())
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// servedClient is a keep-alive HTTP/1.1 connection from a local address of
// its own, for the tests that fill a listener with them.
type servedClient struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialServed(t *testing.T, from, addr string) *servedClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &servedClient{conn: c, r: bufio.NewReader(c)}
}

// send writes GET path on the connection without reading the answer.
func (s *servedClient) send(path string) error {
	_ = s.conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err := io.WriteString(s.conn, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	return err
}

// read reads one answer's status, or the error of a connection closed.
func (s *servedClient) read() (int, error) {
	resp, err := http.ReadResponse(s.r, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (s *servedClient) get(path string) (int, error) {
	if err := s.send(path); err != nil {
		return 0, err
	}
	return s.read()
}

// closed reports whether the listener closed the connection: a read ends
// at once, with no byte.
func (s *servedClient) closed() bool {
	_ = s.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := s.r.Read(make([]byte, 1))
	return n == 0 && err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestIdleConnectionsCannotLockANewClientOut fills a listener capped at 6
// connections with keep-alive connections that made one request and went
// idle, 3 from each of two addresses, as many idle connections from many
// addresses did to a node's port. A client from a third address is served
// all the same: its connection closes the one idle longest of an address
// holding the most, and only that one. With a request under way on every
// connection, a new one is refused, and none of them is closed.
func TestIdleConnectionsCannotLockANewClientOut(t *testing.T) {
	t.Parallel()
	l := New(listen(t), Limits{MaxConns: 6, MaxConnsPerClient: 3, ShedIdle: true}, slog.New(slog.DiscardHandler))
	release := make(chan struct{})
	// wentIdle hears each time the server has seen a connection go idle,
	// which it may see after the client read its answer: the next
	// connection is opened only then, so that the first is the one idle
	// longest in the listener's eyes too.
	wentIdle := make(chan struct{}, 64)
	connState := func(c net.Conn, state http.ConnState) {
		l.ConnState(c, state)
		if state == http.StateIdle {
			select {
			case wentIdle <- struct{}{}:
			default:
			}
		}
	}
	srv := &http.Server{ConnState: connState, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	addr := l.Addr().String()

	var idle []*servedClient
	for _, from := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3", "127.0.0.3"} {
		c := dialServed(t, from, addr)
		if status, err := c.get("/"); err != nil || status != http.StatusOK {
			t.Fatalf("a connection from %s: %d, %v", from, status, err)
		}
		<-wentIdle
		idle = append(idle, c)
	}
	var newcomer *servedClient
	for deadline := time.Now().Add(10 * time.Second); newcomer == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a client from 127.0.0.4 was refused for 10 s while 6 connections sat idle")
		}
		c := dialServed(t, "127.0.0.4", addr)
		if status, err := c.get("/"); err == nil && status == http.StatusOK {
			newcomer = c
		}
	}
	if !idle[0].closed() {
		t.Fatal("the connection idle longest was not the one closed")
	}
	for i, c := range idle[1:] {
		if status, err := c.get("/"); err != nil || status != http.StatusOK {
			t.Fatalf("idle connection %d: %d, %v; want it still served", i+1, status, err)
		}
	}

	busy := append(idle[1:], newcomer)
	for i, c := range busy {
		if err := c.send("/hold"); err != nil {
			t.Fatalf("holding a request on connection %d: %v", i, err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); l.busy() < len(busy); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests under way", l.busy(), len(busy))
		}
	}
	if refused := dialServed(t, "127.0.0.6", addr); !refused.closed() {
		t.Fatal("a new connection was kept while every place had a request under way")
	}
	close(release)
	for i, c := range busy {
		if status, err := c.read(); err != nil || status != http.StatusOK {
			t.Fatalf("held request %d: %d, %v; want it answered, its connection kept", i, status, err)
		}
	}
}

// TestACallUnderWayKeepsItsConnection: a connection whose server reports a
// call under way (Serving, as the gRPC API does) is never closed to make
// room, however long it has been silent; an idle one is.
func TestACallUnderWayKeepsItsConnection(t *testing.T) {
	t.Parallel()
	l := New(listen(t), Limits{MaxConns: 2, ShedIdle: true}, slog.New(slog.DiscardHandler))
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }() // a server reading until the conn closes
		}
	}()
	addr := l.Addr().String()
	calling, idle := dialServed(t, "127.0.0.2", addr), dialServed(t, "127.0.0.3", addr)
	var serverSide []net.Conn
	for range 2 {
		serverSide = append(serverSide, <-accepted)
	}
	for _, c := range serverSide {
		if c.RemoteAddr().String() == calling.conn.LocalAddr().String() {
			defer l.Serving(c.RemoteAddr().String())()
		}
	}
	// The idle one, not the one with a call under way, makes room, once
	// both have been silent past the grace.
	waitAdmitted(t, "127.0.0.4", addr, accepted)
	if !idle.closed() {
		t.Fatal("the idle connection was not closed to make room")
	}
	_ = calling.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := calling.r.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection with a call under way: %v, want it open", err)
	}
}

// waitAdmitted dials addr from from until the listener keeps a connection,
// and returns the server's side of it.
func waitAdmitted(t *testing.T, from, addr string, accepted <-chan net.Conn) net.Conn {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a connection from %s was never kept", from)
		}
		c := dialServed(t, from, addr)
		select {
		case s := <-accepted:
			return s
		case <-time.After(200 * time.Millisecond):
			c.conn.Close()
		}
	}
}
