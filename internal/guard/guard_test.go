package guard

import (
	"errors"
	"io"
	"log/slog"
	"net"
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
