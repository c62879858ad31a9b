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
