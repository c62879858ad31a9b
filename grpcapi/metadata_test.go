package grpcapi

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/limitnode/limitnode/internal/testenv"
)

// TestMetadataIsBounded: a call's metadata (its HTTP/2 header list) is
// bounded by MaxHeaderListBytes before anything reads it. grpc-go's default
// is 16 MiB, and the health service needs no token: a client held 4 MB of
// metadata per open Watch stream (50 streams: RSS 23 -> 238 MB), and the
// stream caps let one address hold 64 of them. A client that heeds the
// server's SETTINGS is refused before it sends; one that ignores them has
// its stream reset; metadata within the bound is served.
func TestMetadataIsBounded(t *testing.T) {
	t.Parallel()
	addr := serveOn(t, &fakeLimiter{}, Options{})
	conn := clientFrom(t, "127.0.0.1", addr)
	for _, tt := range []struct {
		name  string
		bytes int
		ok    bool
	}{
		{"within the bound", MaxHeaderListBytes / 2, true},
		{"past the bound", 4 * MaxHeaderListBytes, false},
	} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-pad", strings.Repeat("a", tt.bytes))
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if (err == nil) != tt.ok {
			t.Fatalf("a health check with %d bytes of metadata: %v, want served %v", tt.bytes, err, tt.ok)
		}
	}
	if got := rawHealthCheck(t, addr, 1<<20); got != "reset" {
		t.Fatalf("a health check with 1 MiB of metadata, sent whatever the server's SETTINGS say: %s, want the stream reset", got)
	}
	if got := rawHealthCheck(t, addr, 1<<10); got != "answered" {
		t.Fatalf("a health check with 1 KiB of metadata over the same raw client: %s, want it answered", got)
	}
}

// rawHealthCheck sends a health Check whose metadata holds pad bytes over
// a hand-driven HTTP/2 connection that ignores the server's
// SETTINGS_MAX_HEADER_LIST_SIZE, and says what the server did with the
// stream: "answered" (response headers) or "reset" (RST_STREAM, or the
// connection closed).
func rawHealthCheck(t *testing.T, addr string, pad int) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"}, {":authority", addr},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"x-pad", strings.Repeat("a", pad)},
	} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	const frame = 16 << 10 // HTTP/2's default SETTINGS_MAX_FRAME_SIZE
	rest := block.Bytes()
	first := rest[:min(frame, len(rest))]
	rest = rest[len(first):]
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndHeaders: len(rest) == 0}); err != nil {
		return "reset"
	}
	for len(rest) > 0 {
		chunk := rest[:min(frame, len(rest))]
		rest = rest[len(chunk):]
		if err := fr.WriteContinuation(1, len(rest) == 0, chunk); err != nil {
			return "reset"
		}
	}
	// An empty request message: a 5-byte gRPC frame header.
	if err := fr.WriteData(1, true, make([]byte, 5)); err != nil {
		return "reset"
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "reset"
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return "reset"
			}
		case *http2.GoAwayFrame:
			return "reset"
		case *http2.HeadersFrame:
			if f.StreamID == 1 {
				return "answered"
			}
		}
	}
}

// TestCallsUnderWayArePerClientCapped: a unary call whose message never
// comes waits on its stream, holding its metadata and a goroutine, and one
// client address could hold MaxConcurrentStreams of them on each of its
// connections. With MaxCallsPerClient 4, four such calls from 127.0.0.1
// leave a fifth from it RESOURCE_EXHAUSTED while 127.0.0.2 is served, and
// the place comes back when a stalled call's stream is reset.
func TestCallsUnderWayArePerClientCapped(t *testing.T) {
	t.Parallel()
	addr := serveOn(t, &fakeLimiter{}, Options{MaxCallsPerClient: 4})
	stalled := make([]*http2.Framer, 4)
	for i := range stalled {
		stalled[i] = stallCall(t, addr)
	}
	first, second := clientFrom(t, "127.0.0.1", addr), clientFrom(t, "127.0.0.2", addr)
	_, err := healthpb.NewHealthClient(first).Check(context.Background(), &healthpb.HealthCheckRequest{})
	mustBeExhausted(t, err, "a fifth call from 127.0.0.1")
	if _, err := healthpb.NewHealthClient(second).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a call from 127.0.0.2: %v", err)
	}
	if err := stalled[0].WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "a call from 127.0.0.1 to be served after a stalled one was reset", func() bool {
		_, err := healthpb.NewHealthClient(first).Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err == nil
	})
}

// stallCall opens a connection from 127.0.0.1 and starts a health Check on
// stream 1 whose request message never comes, and returns the connection's
// framer once the server has answered the connection's SETTINGS.
func stallCall(t *testing.T, addr string) *http2.Framer {
	t.Helper()
	c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}).Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"}, {":authority", addr},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// The server's SETTINGS and the ack of ours come before any answer; a
	// PING's ack after the HEADERS says the server has read them.
	if err := fr.WritePing(false, [8]byte{1}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("a stalled call's connection: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if f.IsAck() {
				return fr
			}
		case *http2.RSTStreamFrame, *http2.GoAwayFrame, *http2.HeadersFrame:
			t.Fatalf("a stalled call was answered: %v", f)
		}
	}
}
