package guard

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
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
