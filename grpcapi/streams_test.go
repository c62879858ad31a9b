package grpcapi

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/limitnode/limitnode/internal/testenv"
)

// serveOn starts the server on 127.0.0.1 and returns its address.
func serveOn(t *testing.T, l Limiter, opts Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(l, opts)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

// clientFrom is a client of addr whose connection comes from the local
// address from ("127.0.0.2").
func clientFrom(t *testing.T, from, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
			return d.DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// watch opens a health Watch stream and returns it with what its first
// Recv gave: the stream is open once it has its first status.
func watch(t *testing.T, conn *grpc.ClientConn) (cancel context.CancelFunc, err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return cancel, err
	}
	_, err = stream.Recv()
	return cancel, err
}

func mustBeExhausted(t *testing.T, err error, what string) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED", what, err)
	}
}

// TestHealthWatchStreamsAreCapped opens unauthenticated health Watch
// streams up to the caps (4 per client address, 6 in all): one more from
// the first address is refused, then another address gets the last two
// places and is refused a third; unary calls still pass; a stream closed
// gives its place back.
func TestHealthWatchStreamsAreCapped(t *testing.T) {
	t.Parallel()
	addr := serveOn(t, &fakeLimiter{}, Options{MaxStreams: 6, MaxStreamsPerClient: 4})
	first, second := clientFrom(t, "127.0.0.1", addr), clientFrom(t, "127.0.0.2", addr)
	var cancels []context.CancelFunc
	for i := range 4 {
		cancel, err := watch(t, first)
		if err != nil {
			t.Fatalf("stream %d from 127.0.0.1: %v", i, err)
		}
		cancels = append(cancels, cancel)
	}
	_, err := watch(t, first)
	mustBeExhausted(t, err, "a fifth stream from 127.0.0.1")
	for i := range 2 {
		if _, err := watch(t, second); err != nil {
			t.Fatalf("stream %d from 127.0.0.2: %v", i, err)
		}
	}
	_, err = watch(t, second)
	mustBeExhausted(t, err, "a seventh stream in all")
	if resp, err := healthpb.NewHealthClient(first).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("a unary call at the cap: %v, %v", resp, err)
	}
	cancels[0]()
	testenv.WaitFor(t, "the closed stream's place to be given back", func() bool {
		_, err := watch(t, second)
		if err != nil {
			mustBeExhausted(t, err, "a stream while the closed one is let go")
		}
		return err == nil
	})
}

// TestAConnectionIsToldItsCapOnCalls reads the server's HTTP/2 SETTINGS:
// they cap the calls one connection may have in flight at
// MaxConcurrentStreams.
func TestAConnectionIsToldItsCapOnCalls(t *testing.T) {
	t.Parallel()
	conn, err := net.Dial("tcp", serveOn(t, &fakeLimiter{}, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// The client preface and an empty SETTINGS frame.
	if _, err := conn.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 0x4, 0, 0, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	for {
		header := make([]byte, 9)
		if _, err := io.ReadFull(conn, header); err != nil {
			t.Fatalf("reading the server's frames: %v", err)
		}
		length, kind, flags := int(header[0])<<16|int(header[1])<<8|int(header[2]), header[3], header[4]
		payload := make([]byte, length)
		if _, err := io.ReadFull(conn, payload); err != nil {
			t.Fatal(err)
		}
		const settings, ack, maxConcurrentStreams = 0x4, 0x1, 0x3
		if kind != settings || flags&ack != 0 {
			continue
		}
		for i := 0; i+6 <= len(payload); i += 6 {
			if binary.BigEndian.Uint16(payload[i:]) == maxConcurrentStreams {
				if got := binary.BigEndian.Uint32(payload[i+2:]); got != MaxConcurrentStreams {
					t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", got, MaxConcurrentStreams)
				}
				return
			}
		}
		t.Fatalf("the server's SETTINGS set no SETTINGS_MAX_CONCURRENT_STREAMS: % x", payload)
	}
}
