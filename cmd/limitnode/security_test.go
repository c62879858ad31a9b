package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/internal/testenv"
)

// cli runs a subcommand as the binary would and returns its output.
func cli(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), args, env(nil), &stdout, &stderr); code != exitOK {
		t.Fatalf("limitnode %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String()
}

// newToken runs limitnode token and returns the token and its file entry.
func newToken(t *testing.T, name, roles string) (token, entry string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(cli(t, "token", "-name", name, "-roles", roles)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ln_") || strings.Contains(lines[1], lines[0]) {
		t.Fatalf("limitnode token printed %q", lines)
	}
	return lines[0], lines[1]
}

func writeTokenFile(t *testing.T, path string, entries ...string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(`{"tokens": [`+strings.Join(entries, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func caPool(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		t.Fatalf("%s holds no certificate", path)
	}
	return pool
}

// TestSecureThreeNodesFromTheCommandLine follows the secure cluster of
// docs/security.md: certificates and tokens made by the binary, three nodes with
// mutual TLS between them, HTTPS and tokens, the second and third joining
// with the join token. Decisions need a decide token; nothing works without
// one.
func TestSecureThreeNodesFromTheCommandLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cli(t, "certs", "-dir", dir, "-nodes", "n1,n2,n3")
	checkoutToken, checkoutEntry := newToken(t, "checkout", "decide")
	opsToken, opsEntry := newToken(t, "ops", "admin")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, checkoutEntry, opsEntry)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := func(id, join string) []string {
		args := []string{"-id", id, "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(),
			"-tls-cert", filepath.Join(dir, id+".pem"), "-tls-key", filepath.Join(dir, id+"-key.pem"),
			"-node-cert", filepath.Join(dir, id+".pem"), "-node-key", filepath.Join(dir, id+"-key.pem"), "-node-ca", filepath.Join(dir, "ca.pem"),
			"-auth", tokens}
		if join != "" {
			args = append(args, "-join", join)
		}
		return args
	}
	joinToken := map[string]string{"LIMITNODE_JOIN_TOKEN": opsToken}
	n1 := startNode(t, ctx, node("n1", ""), nil)
	n2 := startNode(t, ctx, node("n2", n1.addr), joinToken)
	n3 := startNode(t, ctx, node("n3", n2.addr), joinToken)

	trust := &tls.Config{RootCAs: caPool(t, filepath.Join(dir, "ca.pem"))}
	limit := &client.Limit{Rate: 2, Period: time.Hour}
	allowed := 0
	for _, n := range []running{n1, n2, n3} {
		d, err := client.NewWithOptions(client.Options{TLS: trust, Token: checkoutToken}, n.addr).Allow(ctx, client.AllowRequest{Key: "secure", Limit: limit})
		if err != nil {
			t.Fatalf("allow on %s: %v", n.addr, err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("%d of 3 allowed under a limit of 2", allowed)
	}
	st, err := client.NewWithOptions(client.Options{TLS: trust, Token: opsToken}, n3.addr).Cluster(ctx)
	if err != nil || len(st.Nodes) != 3 {
		t.Fatalf("cluster: %+v, %v", st, err)
	}
	var apiErr *client.Error
	if _, err := client.NewWithOptions(client.Options{TLS: trust}, n1.addr).Allow(ctx, client.AllowRequest{Key: "secure", Limit: limit}); !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("without a token: %v, want 401", err)
	}
	if _, err := client.NewWithOptions(client.Options{TLS: trust, Token: checkoutToken}, n1.addr).Cluster(ctx); !errors.As(err, &apiErr) || apiErr.StatusCode != 403 {
		t.Fatalf("a decide token reading the cluster: %v, want 403", err)
	}
	if _, err := client.New(nil, "http://"+n1.addr).Cluster(ctx); err == nil {
		t.Fatal("the HTTPS port answered plain HTTP")
	}
	cancel()
	for _, n := range []running{n3, n2, n1} {
		if err := <-n.done; err != nil {
			t.Fatalf("node %s stopped with %v", n.addr, err)
		}
	}
}

// TestRotationWhileRequestsFlow replaces the HTTP certificate and the token
// file of a running node while clients call it: no call with credentials
// valid at the time fails, new connections get the new certificate, and a
// removed token stops working.
func TestRotationWhileRequestsFlow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cli(t, "certs", "-dir", dir, "-nodes", "n1")
	oldToken, oldEntry := newToken(t, "old", "decide")
	newTok, newEntry := newToken(t, "new", "decide")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, oldEntry)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := startNode(t, ctx, []string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(),
		"-tls-cert", filepath.Join(dir, "n1.pem"), "-tls-key", filepath.Join(dir, "n1-key.pem"), "-auth", tokens}, nil)

	trust := &tls.Config{RootCAs: caPool(t, filepath.Join(dir, "ca.pem"))}
	// Calls hold tokenMu for reading while they use the token in force;
	// switching takes it for writing, so no call is still using the old
	// token when it is removed.
	var tokenMu sync.RWMutex
	current := oldToken
	var failures atomic.Int64
	var calls atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			// No keep-alive: every call is a new TLS handshake, so it sees
			// the certificate the node serves now.
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: trust, DisableKeepAlives: true}}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tokenMu.RLock()
				cc := client.NewWithOptions(client.Options{HTTPClient: hc, Token: current}, "https://"+n.addr)
				if _, err := cc.Allow(ctx, client.AllowRequest{Key: fmt.Sprint("rotate-", i), Limit: &client.Limit{Rate: 1000, Period: time.Second}}); err != nil {
					failures.Add(1)
					t.Errorf("a call with the token in force failed: %v", err)
				}
				tokenMu.RUnlock()
				calls.Add(1)
			}
		})
	}
	served := func() []byte {
		conn, err := tls.Dial("tcp", n.addr, trust)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw
	}
	before := served()
	testenv.WaitFor(t, "calls to flow", func() bool { return calls.Load() > 20 })

	// A new certificate from the same CA, written over the old files.
	cli(t, "certs", "-dir", dir, "-nodes", "n1")
	testenv.WaitFor(t, "new connections to get the new certificate", func() bool { return !bytes.Equal(served(), before) })

	// Add the new token, move the clients to it, then remove the old one.
	writeTokenFile(t, tokens, oldEntry, newEntry)
	testenv.WaitFor(t, "the new token to work", func() bool { return allowWith(ctx, n.addr, trust, newTok) == nil })
	tokenMu.Lock()
	current = newTok
	tokenMu.Unlock()
	writeTokenFile(t, tokens, newEntry)
	testenv.WaitFor(t, "the removed token to stop working", func() bool {
		var apiErr *client.Error
		return errors.As(allowWith(ctx, n.addr, trust, oldToken), &apiErr) && apiErr.StatusCode == 401
	})
	mark := calls.Load()
	testenv.WaitFor(t, "calls to go on with the new token", func() bool { return calls.Load() > mark+20 })
	close(stop)
	wg.Wait()
	if failures.Load() > 0 {
		t.Fatalf("%d of %d calls failed", failures.Load(), calls.Load())
	}
	cancel()
	if err := <-n.done; err != nil {
		t.Fatal(err)
	}
}

func allowWith(ctx context.Context, addr string, trust *tls.Config, token string) error {
	_, err := client.NewWithOptions(client.Options{TLS: trust, Token: token}, addr).Allow(ctx, client.AllowRequest{Key: "probe", Limit: &client.Limit{Rate: 1000, Period: time.Second}})
	return err
}

// TestBadSecurityFilesStopTheNode: a missing or malformed certificate, key
// or token file, or an incomplete set of TLS flags, stops the node at start
// with one line naming the file or the flags.
func TestBadSecurityFilesStopTheNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cli(t, "certs", "-dir", dir, "-nodes", "n1")
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("{not pem, not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	badRole := filepath.Join(dir, "bad-role.json")
	writeTokenFile(t, badRole, `{"name": "ci", "sha256": "`+strings.Repeat("a", 64)+`", "roles": ["root"]}`)
	cert, key, ca := filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem"), filepath.Join(dir, "ca.pem")
	tests := []struct {
		name        string
		args        []string
		wantInError string
		wantStatus  int
	}{
		{"a missing certificate", []string{"-tls-cert", filepath.Join(dir, "nope.pem"), "-tls-key", key}, "nope.pem", exitError},
		{"a malformed certificate", []string{"-tls-cert", garbage, "-tls-key", key}, "garbage", exitError},
		{"a key of another certificate", []string{"-tls-cert", cert, "-tls-key", ca}, "n1.pem", exitError},
		{"a malformed node CA", []string{"-node-cert", cert, "-node-key", key, "-node-ca", garbage}, "garbage", exitError},
		{"a token file that is not JSON", []string{"-auth", garbage}, "garbage", exitError},
		{"a token with an unknown role", []string{"-auth", badRole}, `unknown role "root"`, exitError},
		{"a certificate without its key", []string{"-tls-cert", cert}, "-tls-cert and -tls-key", exitUsage},
		{"node TLS without its CA", []string{"-node-cert", cert, "-node-key", key}, "without -node-ca", exitUsage},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		args := append([]string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir()}, tt.args...)
		status := dispatch(context.Background(), args, env(nil), io.Discard, &stderr)
		out := strings.TrimSpace(stderr.String())
		if status != tt.wantStatus || !strings.Contains(out, tt.wantInError) || strings.Count(out, "\n") > 0 {
			t.Errorf("%s: exit %d, %q; want exit %d and one line mentioning %q", tt.name, status, out, tt.wantStatus, tt.wantInError)
		}
	}
}

// TestLogsHoldNoSecret: a node started with a join token and a token file
// logs neither the token nor the file's hashes.
func TestLogsHoldNoSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token, entry := newToken(t, "ops", "admin")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, entry)
	var logs testenv.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(), "-auth", tokens, "-log-level", "debug"}, env(map[string]string{"LIMITNODE_JOIN_TOKEN": token}), &logs, ready)
	}()
	<-ready
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	hash := strings.Split(entry, `"`)[7]
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), token) || strings.Contains(sc.Text(), hash) {
			t.Fatalf("a log line holds a secret: %s", sc.Text())
		}
	}
}

// TestAnExposedPortIsAWarning: each client port (HTTP, gRPC) that listens
// beyond loopback without tokens or without TLS is a warning naming its
// flag and what is missing; the Raft port without mutual TLS too; loopback
// and a fully protected node are silent.
func TestAnExposedPortIsAWarning(t *testing.T) {
	t.Parallel()
	tokens, tlsOn, nodeTLS := &auth.File{}, &tls.Config{}, &cluster.NodeTLS{}
	tests := []struct {
		name string
		c    func(*config)
		s    secured
		want []string // one per warning, each a part of it
	}{
		{"loopback is silent", nil, secured{}, nil},
		{"everything protected is silent", func(c *config) { c.httpAddr, c.grpcAddr, c.raftAddr = "0.0.0.0:7070", "0.0.0.0:8081", "10.0.0.1:7071" },
			secured{httpTLS: tlsOn, authz: tokens, nodeTLS: nodeTLS}, nil},
		{"HTTP with neither", func(c *config) { c.httpAddr = "0.0.0.0:7070" }, secured{},
			[]string{`HTTP API listens beyond loopback with neither TLS nor tokens`}},
		{"HTTP with TLS but no tokens", func(c *config) { c.httpAddr = "10.0.0.1:7070" }, secured{httpTLS: tlsOn},
			[]string{`HTTP API listens beyond loopback without tokens`}},
		{"HTTP with tokens but no TLS", func(c *config) { c.httpAddr = "10.0.0.1:7070" }, secured{authz: tokens},
			[]string{`HTTP API listens beyond loopback without TLS`}},
		{"gRPC with neither", func(c *config) { c.grpcAddr = ":8081" }, secured{},
			[]string{`gRPC API listens beyond loopback with neither TLS nor tokens`}},
		{"gRPC with TLS but no tokens", func(c *config) { c.grpcAddr = "[::]:8081" }, secured{httpTLS: tlsOn},
			[]string{`gRPC API listens beyond loopback without tokens`}},
		{"gRPC on loopback is silent", func(c *config) { c.grpcAddr = "127.0.0.1:8081" }, secured{}, nil},
		{"Raft without mutual TLS", func(c *config) { c.raftAddr = "10.0.0.1:7071" }, secured{}, []string{`Raft port listens beyond loopback without mutual TLS`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			warnIfExposed(slog.New(slog.NewTextHandler(&logs, nil)), defaultConfig(tt.c), tt.s)
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if logs.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tt.want) {
				t.Fatalf("%d warnings, want %d:\n%s", len(lines), len(tt.want), logs.String())
			}
			for i, want := range tt.want {
				if !strings.Contains(lines[i], "level=WARN") || !strings.Contains(lines[i], want) {
					t.Fatalf("warning %q, want one saying %q", lines[i], want)
				}
			}
		})
	}
}
