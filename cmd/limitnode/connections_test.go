package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/internal/testenv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// dialFrom connects to addr from the local address from ("127.0.0.2").
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// keptAlive is an HTTP/1.1 connection a test sends requests on, one at a
// time.
type keptAlive struct {
	conn net.Conn
	r    *bufio.Reader
}

func keepAlive(t *testing.T, from, addr string) *keptAlive {
	t.Helper()
	c := dialFrom(t, from, addr)
	return &keptAlive{conn: c, r: bufio.NewReader(c)}
}

// get sends GET path (with the bearer token, unless "") and returns the
// status, or the error of a connection the node closed.
func (k *keptAlive) get(path, token string) (int, error) {
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	_ = k.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(k.conn, "GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"+auth+"\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// closedByTheNode waits for the node to close c, which must send nothing
// first; the deadline is only there so that a node that never closes it
// fails the test instead of hanging it.
func closedByTheNode(c net.Conn, r io.Reader) error {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := r.Read(make([]byte, 1))
	switch {
	case n > 0:
		return errors.New("the node sent a byte")
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return nil
	case err != nil && strings.Contains(err.Error(), "connection reset"):
		return nil
	}
	return err
}

// readyAt reports whether the node at addr answers /readyz with 200.
func readyAt(addr string) bool {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// grpcFrom is a gRPC client of addr whose connection comes from the local
// address from.
func grpcFrom(t *testing.T, from, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
			return d.DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestOneClientAddressCannotLockTheOthersOut starts a node with tokens, a
// gRPC port and a cap of 8 connections per client address, then holds 8
// keep-alive connections from 127.0.0.1 on each port, each having made a
// call with a valid token (so that nothing closes them as idle for two
// minutes): a ninth from 127.0.0.1 is closed at once, on either port, while
// a client from 127.0.0.2 (another loopback address, another client) is
// served on both.
func TestOneClientAddressCannotLockTheOthersOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token, entry := newToken(t, "checkout", "decide")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, entry)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-grpc", "127.0.0.1:0",
		"-data", t.TempDir(), "-auth", tokens, "-max-conns-per-client", "8"}, nil)
	grpcAddr := node.addrs.GRPC
	testenv.WaitFor(t, "the node to be ready", func() bool { return readyAt(node.addr) })

	for i := range 8 {
		if status, err := keepAlive(t, "127.0.0.1", node.addr).get("/v1/allow", token); err != nil || status != http.StatusMethodNotAllowed {
			t.Fatalf("HTTP connection %d: %d, %v", i, status, err)
		}
		conn := grpcFrom(t, "127.0.0.1", grpcAddr)
		authorized := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		_, err := ratelimitv3.NewRateLimitServiceClient(conn).ShouldRateLimit(authorized, &ratelimitv3.RateLimitRequest{Domain: "none",
			Descriptors: nil})
		if err != nil && strings.Contains(err.Error(), "Unavailable") {
			t.Fatalf("gRPC connection %d: %v", i, err)
		}
	}
	ninth := keepAlive(t, "127.0.0.1", node.addr)
	if err := closedByTheNode(ninth.conn, ninth.r); err != nil {
		t.Fatalf("a ninth HTTP connection from 127.0.0.1: %v, want it closed at once", err)
	}
	ninthGRPC := dialFrom(t, "127.0.0.1", grpcAddr)
	if err := closedByTheNode(ninthGRPC, ninthGRPC); err != nil {
		t.Fatalf("a ninth gRPC connection from 127.0.0.1: %v, want it closed at once", err)
	}
	if status, err := keepAlive(t, "127.0.0.2", node.addr).get("/v1/cluster", ""); err != nil || status != http.StatusUnauthorized {
		t.Fatalf("HTTP from 127.0.0.2: %d, %v; want the node's 401", status, err)
	}
	other := healthpb.NewHealthClient(grpcFrom(t, "127.0.0.2", grpcAddr))
	testenv.WaitFor(t, "gRPC health from 127.0.0.2 to say SERVING", func() bool {
		resp, err := other.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("gRPC health from 127.0.0.2: %v", err)
		}
		return resp.Status == healthpb.HealthCheckResponse_SERVING
	})
}

// TestConnectionsThatProveNothingAreClosedSooner starts a node with tokens
// and -untrusted-idle-timeout 1s: a keep-alive connection that asked only
// /healthz, one that was refused for want of a token, one that never sent
// a byte, and a gRPC connection that only checked health are each closed by
// the node; one that made a call with a valid token is still served after
// three times as long.
func TestConnectionsThatProveNothingAreClosedSooner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token, entry := newToken(t, "ops", "read")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, entry)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-grpc", "127.0.0.1:0",
		"-data", t.TempDir(), "-auth", tokens, "-untrusted-idle-timeout", "1s"}, nil)
	grpcAddr := node.addrs.GRPC

	proven := keepAlive(t, "127.0.0.1", node.addr)
	if status, err := proven.get("/v1/cluster", token); err != nil || status != http.StatusOK {
		t.Fatalf("with a token: %d, %v", status, err)
	}
	for _, tt := range []struct{ what, path string }{{"asked /healthz", "/healthz"}, {"was refused a token", "/v1/cluster"}} {
		k := keepAlive(t, "127.0.0.1", node.addr)
		if _, err := k.get(tt.path, ""); err != nil {
			t.Fatalf("a connection that %s: %v", tt.what, err)
		}
		if err := closedByTheNode(k.conn, k.r); err != nil {
			t.Fatalf("a connection that %s: %v, want the node to close it", tt.what, err)
		}
	}
	silent := dialFrom(t, "127.0.0.1", node.addr)
	if err := closedByTheNode(silent, silent); err != nil {
		t.Fatalf("a connection that sent nothing: %v, want the node to close it", err)
	}

	// A gRPC connection that only checks health: the node closes it, and
	// the client's channel leaves READY.
	health := grpcFrom(t, "127.0.0.1", grpcAddr)
	if _, err := healthpb.NewHealthClient(health).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the node to close the gRPC connection that only checked health", func() bool {
		return health.GetState().String() != "READY"
	})

	time.Sleep(3 * time.Second) // three untrusted idle times: not a bound on speed, a span to outlast
	if status, err := proven.get("/v1/cluster", token); err != nil || status != http.StatusOK {
		t.Fatalf("the connection that made a call with a token, after 3s: %d, %v", status, err)
	}
}

// TestTheDescriptorLimitBoundsTheCaps runs the binary under an
// RLIMIT_NOFILE of 2,000: its default caps (10,000 HTTP and 10,000 gRPC
// connections, 1,024 on the Raft port) are lowered so that, with the
// descriptors kept aside, they fit, with a warning naming the limit, and the
// node serves; caps given on the command line are kept, with a warning that
// they do not fit.
func TestTheDescriptorLimitBoundsTheCaps(t *testing.T) {
	testenv.NeedPrograms(t, "bash", "go")
	bin := buildBinary(t)
	for _, tt := range []struct {
		name  string
		flags []string
		want  string
		fits  bool
	}{
		{"defaults are lowered", nil, `msg="RLIMIT_NOFILE is too low for the default connection caps`, true},
		{"given caps are kept", []string{"-max-http-conns", "5000", "-max-raft-conns", "100"}, `msg="the connection caps can need more file descriptors than RLIMIT_NOFILE allows`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs, addrFile := filepath.Join(t.TempDir(), "node.log"), newAddrFile(t)
			args := append([]string{"-c", "ulimit -n 2000 && exec \"$0\" \"$@\" 2>" + logs, bin, "-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0",
				"-grpc", "127.0.0.1:0", "-data", t.TempDir(), "-addr-file", addrFile}, tt.flags...)
			node := startProcess(t, addrFile, "bash", args...)
			testenv.WaitFor(t, "the node to serve", func() bool { return readyAt(node.addrs.HTTP) })
			data, err := os.ReadFile(logs)
			if err != nil {
				t.Fatal(err)
			}
			_, warning, ok := strings.Cut(string(data), tt.want)
			warning, _, _ = strings.Cut(warning, "\n")
			if !ok || !strings.Contains(warning, "rlimit_nofile=2000") {
				t.Fatalf("the log lacks a warning %s... naming rlimit_nofile=2000:\n%s", tt.want, data)
			}
			caps := map[string]int{}
			for _, field := range strings.Fields(warning) {
				if name, value, ok := strings.Cut(field, "="); ok {
					caps[name], _ = strconv.Atoi(value)
				}
			}
			needed := 2*caps["max_http_conns"] + caps["max_raft_conns"] + reservedDescriptors
			if fits := needed <= 2000 && caps["max_http_conns"] > 0 && caps["max_raft_conns"] > 0; fits != tt.fits {
				t.Fatalf("caps %v need %d descriptors of 2000: fits %v, want %v", caps, needed, fits, tt.fits)
			}
			if tt.fits && (caps["max_conns_per_client"] <= 0 || caps["max_conns_per_client"] > caps["max_http_conns"]/4) {
				t.Fatalf("max_conns_per_client %d: want at most a quarter of max_http_conns %d", caps["max_conns_per_client"], caps["max_http_conns"])
			}
		})
	}
}
