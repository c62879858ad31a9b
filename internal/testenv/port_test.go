package testenv

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestAHeldPortIsLentToOneServerAtATime: a connection reaches the server
// the port is lent to; while it is lent to none, a connection is reset as
// at a closed port; a second server waits for the first to give it back;
// and the address never changes.
func TestAHeldPortIsLentToOneServerAtATime(t *testing.T) {
	t.Parallel()
	p := HoldPort(t)
	echoOnce := func(ln net.Listener) {
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = io.CopyN(conn, conn, 1)
		}()
	}
	roundTrip := func() error {
		conn, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(WaitTimeout))
		if _, err := conn.Write([]byte{'x'}); err != nil {
			return err
		}
		_, err = io.ReadFull(conn, make([]byte, 1))
		return err
	}
	for round := range 2 {
		ln, err := p.Listener()
		if err != nil {
			t.Fatal(err)
		}
		if ln.Addr().String() != p.Addr() {
			t.Fatalf("round %d: lent at %s, held at %s", round, ln.Addr(), p.Addr())
		}
		if _, err := p.Listener(); err == nil {
			t.Fatalf("round %d: the port was lent twice at once", round)
		}
		echoOnce(ln)
		if err := roundTrip(); err != nil {
			t.Fatalf("round %d: through the lent port: %v", round, err)
		}
		ln.Close()
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("round %d: Accept after Close: %v, want net.ErrClosed", round, err)
		}
		if err := roundTrip(); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, io.EOF) {
			t.Fatalf("round %d: with the port lent to no one: %v, want the connection reset", round, err)
		}
	}
}
