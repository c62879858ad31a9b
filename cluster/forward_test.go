package cluster

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

	"github.com/limitnode/limitnode/fsm"
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

// eventually polls cond until it holds or a generous deadline passes: a
// peer's close reaches this side asynchronously.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still false after 5s", what)
		}
		time.Sleep(time.Millisecond)
	}
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
				eventually(t, "peerClosed", func() bool { return peerClosed(client) })
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

// fakeLeader answers forwarded opAllow messages with one empty result per
// request, and can drop every connection it has, as a restart would.
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
	if _, err := io.ReadFull(conn, protocol[:]); err != nil || protocol[0] != protocolForward {
		conn.Close()
		return
	}
	fc := newForwardConn(conn)
	for {
		var req forwardRequest
		if err := fc.read(&req); err != nil {
			return
		}
		if err := fc.write(&forwardResponse{Results: make([]fsm.Result, len(req.Requests))}); err != nil {
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
// not turn the next forward into "outcome unknown": the forwarder sees the
// peer's close and dials afresh.
func TestForwarderRedialsWhenThePeerClosedAPooledConnection(t *testing.T) {
	t.Parallel()
	leader := startFakeLeader(t)
	addr := leader.ln.Addr().String()
	f := newForwarder(dialer{dial: dialTCP}, time.Second)
	defer f.close()
	msg := &forwardRequest{Op: opAllow, Requests: []fsm.Request{{RequestID: "a"}}}
	if _, err := f.send(context.Background(), addr, msg); err != nil {
		t.Fatalf("first forward: %v", err)
	}
	f.mu.Lock()
	pooled := f.idle[addr]
	f.mu.Unlock()
	if len(pooled) != 1 {
		t.Fatalf("%d pooled connections after one forward, want 1", len(pooled))
	}
	leader.dropAll()
	eventually(t, "the pooled connection sees the close", func() bool { return peerClosed(pooled[0].conn) })
	for i := range 3 {
		resp, err := f.send(context.Background(), addr, msg)
		if err != nil {
			t.Fatalf("forward %d after the peer closed: %v", i, err)
		}
		if len(resp.Results) != 1 {
			t.Fatalf("forward %d: %d results, want 1", i, len(resp.Results))
		}
	}
}

// A forward that fails after it was written is reported as possibly acted
// on (not errNotSent), so the caller does not resend a request without ID.
func TestForwarderReportsAFailureAfterSendingAsAmbiguous(t *testing.T) {
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
		// Read the whole message, then die without answering.
		_, _ = conn.Read(make([]byte, 4096))
		conn.Close()
	}()
	f := newForwarder(dialer{dial: dialTCP}, time.Second)
	defer f.close()
	_, err = f.send(context.Background(), ln.Addr().String(), &forwardRequest{Op: opAllow, Requests: []fsm.Request{{}}})
	if err == nil || errors.Is(err, errNotSent) {
		t.Fatalf("err = %v, want a failure that is not errNotSent", err)
	}
}

// TestForwardFramesAreBounded: a frame that announces more than
// MaxForwardFrameBytes is refused before its body is read or allocated, and
// one whose body trickles in is cut off after frameTimeout; a node keeps
// serving after both.
func TestForwardFramesAreBounded(t *testing.T) {
	t.Parallel()
	server, client := net.Pipe()
	defer client.Close()
	done := make(chan error, 1)
	go func() { done <- newForwardConn(server).read(new(forwardRequest)) }()
	var header [4]byte
	binary.BigEndian.PutUint32(header[:], MaxForwardFrameBytes+1)
	if _, err := client.Write(header[:]); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("an oversized frame: %v", err)
	}
}
