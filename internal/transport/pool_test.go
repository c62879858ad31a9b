package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/internal/testenv"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestPeerClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		peer       func(net.Conn)
		wantClosed bool
	}{
		{"idle and open", func(net.Conn) {}, false},
		{"peer closed", func(c net.Conn) { c.Close() }, true},
		{"peer reset", func(c net.Conn) { _ = c.(*net.TCPConn).SetLinger(0); c.Close() }, true},
		{"peer sent bytes nobody asked for", func(c net.Conn) { _, _ = c.Write([]byte{0x80}) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client, server := tcpPair(t)
			tt.peer(server)
			if tt.wantClosed {
				testenv.WaitFor(t, "peerClosed", func() bool { return peerClosed(client) })
				return
			}
			if peerClosed(client) {
				t.Fatal("an open, idle connection was reported closed")
			}
			// Peeking must not consume anything: the connection still works.
			if _, err := server.Write([]byte("ok")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 2)
			if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "ok" {
				t.Fatalf("read after peek: %q, %v", buf, err)
			}
		})
	}
}

// testProtocol is the protocol of the tests' exchanges.
const testProtocol Protocol = 'T'

// echoRequest and echoResponse are the messages of the tests' exchanges.
type echoRequest struct{ Values []string }
type echoResponse struct{ Count int }

// fakeLeader answers each echoRequest with how many values it held, and can
// drop every connection it has, as a restart would.
type fakeLeader struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startFakeLeader(t *testing.T) *fakeLeader {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &fakeLeader{ln: ln}
	l.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.conns = append(l.conns, conn)
			l.mu.Unlock()
			l.wg.Go(func() { l.serve(conn) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		l.dropAll()
		l.wg.Wait()
	})
	return l
}

func (l *fakeLeader) serve(conn net.Conn) {
	var protocol [1]byte
	if _, err := io.ReadFull(conn, protocol[:]); err != nil || Protocol(protocol[0]) != testProtocol {
		conn.Close()
		return
	}
	if _, ok, err := answerHello(conn, ""); err != nil || !ok {
		conn.Close()
		return
	}
	fc := NewConn(conn)
	for {
		var req echoRequest
		if err := fc.Read(&req); err != nil {
			return
		}
		if err := fc.Write(&echoResponse{Count: len(req.Values)}); err != nil {
			return
		}
	}
}

func (l *fakeLeader) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// A follower's pooled connection to a leader that has since restarted must
// not turn the next exchange into "outcome unknown": the pool sees the
// peer's close and dials afresh.
func TestPoolRedialsWhenThePeerClosedAPooledConnection(t *testing.T) {
	t.Parallel()
	leader := startFakeLeader(t)
	addr := leader.ln.Addr().String()
	p := NewPool(Dialer{}, testProtocol, time.Second)
	defer p.Close()
	msg := &echoRequest{Values: []string{"a"}}
	var resp echoResponse
	if err := p.Exchange(context.Background(), addr, msg, &resp); err != nil {
		t.Fatalf("first exchange: %v", err)
	}
	p.mu.Lock()
	pooled := p.idle[addr]
	p.mu.Unlock()
	if len(pooled) != 1 {
		t.Fatalf("%d pooled connections after one forward, want 1", len(pooled))
	}
	leader.dropAll()
	testenv.WaitFor(t, "the pooled connection sees the close", func() bool { return peerClosed(pooled[0].conn) })
	for i := range 3 {
		var resp echoResponse
		if err := p.Exchange(context.Background(), addr, msg, &resp); err != nil {
			t.Fatalf("exchange %d after the peer closed: %v", i, err)
		}
		if resp.Count != 1 {
			t.Fatalf("exchange %d: count %d, want 1", i, resp.Count)
		}
	}
}

// An exchange that fails after it was written is reported as possibly acted
// on (not ErrNotSent), so the caller does not resend a request without ID.
func TestPoolReportsAFailureAfterSendingAsAmbiguous(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		// Answer the hello, read the whole message, then die without
		// answering it.
		var protocol [1]byte
		_, _ = io.ReadFull(conn, protocol[:])
		_, _, _ = answerHello(conn, "")
		_, _ = conn.Read(make([]byte, 4096))
		conn.Close()
	}()
	p := NewPool(Dialer{}, testProtocol, time.Second)
	defer p.Close()
	err = p.Exchange(context.Background(), ln.Addr().String(), &echoRequest{Values: []string{""}}, new(echoResponse))
	if err == nil || errors.Is(err, ErrNotSent) {
		t.Fatalf("err = %v, want a failure that is not ErrNotSent", err)
	}
}

// TestFramesAreBounded: a frame that announces more than MaxFrameBytes is
// refused before its body is read or allocated.
func TestFramesAreBounded(t *testing.T) {
	t.Parallel()
	server, client := net.Pipe()
	defer client.Close()
	done := make(chan error, 1)
	go func() { done <- NewConn(server).Read(new(echoRequest)) }()
	var header [4]byte
	binary.BigEndian.PutUint32(header[:], MaxFrameBytes+1)
	if _, err := client.Write(header[:]); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("an oversized frame: %v", err)
	}
}
