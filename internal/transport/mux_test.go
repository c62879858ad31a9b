package transport

import (
	"bytes"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/certs"
	"github.com/limitnode/limitnode/internal/testenv"
)

// lockedBuffer is a log sink the mux's goroutines write to while a test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startMux serves testProtocol as a node of cluster, accepting and closing
// every connection that gets through, and returns its address and log.
func startMux(t *testing.T, cluster string) (string, *lockedBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	m := NewMux(ln, nil, func() string { return cluster }, slog.New(slog.NewTextHandler(logs, nil)), testProtocol)
	sub := m.Listener(testProtocol)
	go func() {
		for {
			c, err := sub.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { m.Close() })
	return ln.Addr().String(), logs
}

// TestNodesOfDifferentClustersRefuseEachOther: a dialer and a listener that
// name different cluster IDs refuse each other, whichever has which, with
// an error naming both; a node that knows no ID yet talks to any.
func TestNodesOfDifferentClustersRefuseEachOther(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		dialer, listen string
		refused        bool
	}{
		{"the same cluster", "c-a", "c-a", false},
		{"a dialer of another cluster", "c-b", "c-a", true},
		{"a listener of another cluster", "c-a", "c-b", true},
		{"a dialer being joined", "", "c-a", false},
		{"a listener being joined", "c-a", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr, logs := startMux(t, tt.listen)
			conn, err := Dialer{Cluster: func() string { return tt.dialer }}.Open(addr, testProtocol, time.Second)
			if !tt.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				conn.Close()
				return
			}
			var foreign *ForeignClusterError
			if !errors.As(err, &foreign) || !errors.Is(err, ErrForeignCluster) || foreign.Local != tt.dialer || foreign.Remote != tt.listen {
				t.Fatalf("err = %v, want a ForeignClusterError naming %s and %s", err, tt.dialer, tt.listen)
			}
			testenv.WaitFor(t, "the listener to log the refusal", func() bool {
				out := logs.String()
				return strings.Contains(out, "another cluster") && strings.Contains(out, tt.dialer) && strings.Contains(out, tt.listen)
			})
		})
	}
}

// TestRefusalsAreLoggedOncePerPeerAndInterval: a peer that knocks many
// times a second with garbage, or as a node of another cluster, gets one
// short line per kind, not one per connection.
func TestRefusalsAreLoggedOncePerPeerAndInterval(t *testing.T) {
	t.Parallel()
	addr, logs := startMux(t, "c-a")
	garbage := append([]byte{byte(testProtocol)}, bytes.Repeat([]byte("GARBAGE!"), 4096)...)
	for range 50 {
		if _, err := (Dialer{Cluster: func() string { return "c-b" }}).Open(addr, testProtocol, time.Second); err == nil {
			t.Fatal("a node of another cluster was accepted")
		}
		for _, knock := range [][]byte{garbage, []byte("Zzz")} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write(knock)
			_, _ = c.Read(make([]byte, 16)) // until the mux closes it
			c.Close()
		}
	}
	testenv.WaitFor(t, "every kind of refusal to be logged", func() bool {
		out := logs.String()
		return strings.Contains(out, "another cluster") && strings.Contains(out, "no hello") && strings.Contains(out, "names no protocol")
	})
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines for 150 refused connections, want 3 (one per kind):\n%s", len(lines), logs.String())
	}
	for _, l := range lines {
		if len(l) > 600 || strings.Contains(l, "GARBAGE") {
			t.Fatalf("a refusal logged at length: %s", l)
		}
	}
}

// TestFailedTLSHandshakesAreLoggedOncePerPeerAndInterval: a port that
// speaks mutual TLS, knocked on in plaintext and with a certificate of
// another CA many times a second, logs one short line (15,575 lines in
// 45 s before).
func TestFailedTLSHandshakesAreLoggedOncePerPeerAndInterval(t *testing.T) {
	t.Parallel()
	ours, err := certs.NewDevCA()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ours.Issue("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	m := NewMux(ln, &TLS{Certificate: func() *tls.Certificate { return cert }, CAs: ours.Pool}, nil, slog.New(slog.NewTextHandler(logs, nil)), testProtocol)
	defer m.Close()
	stranger, err := certs.NewDevCA()
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := stranger.Issue("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	foreign := Dialer{TLS: &TLS{Certificate: func() *tls.Certificate { return theirs }, CAs: ours.Pool}}
	for range 100 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(bytes.Repeat([]byte("\x00 not a TLS record\r\n"), 100))
		_, _ = c.Read(make([]byte, 16))
		c.Close()
		if _, err := foreign.Open(ln.Addr().String(), testProtocol, time.Second); err == nil {
			t.Fatal("a certificate of another CA was accepted")
		}
	}
	testenv.WaitFor(t, "the refusals to be logged", func() bool { return strings.Contains(logs.String(), "TLS handshake failed") })
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || len(lines[0]) > 600 {
		t.Fatalf("%d log lines for 200 failed handshakes from one peer, want one short one:\n%s", len(lines), logs.String())
	}
}

// TestTheThrottleCountsWhatItHeldBack: the line after an interval says how
// many refusals were held back.
func TestTheThrottleCountsWhatItHeldBack(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	th := newThrottle(slog.New(slog.NewTextHandler(logs, nil)))
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	peer := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 4000}
	for i := range 5 {
		peer.Port = 4000 + i // a new port each time: the same peer
		th.warn("tls", peer, "refused")
	}
	now = now.Add(refusalLogEvery)
	th.warn("tls", peer, "refused")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "repeats_suppressed=4") {
		t.Fatalf("want two lines, the second counting 4 held back:\n%s", logs.String())
	}
}
