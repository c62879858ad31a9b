package main

import (
	"context"
	"crypto/tls"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestRLSConfigAndGRPCFromTheCommandLine starts a node the way docs/envoy.md's
// node does, and more: -grpc over TLS with tokens, and -rls-config naming a
// directory of envoyproxy/ratelimit files. The files' limits hold over
// gRPC; the rls subcommands list, show, replace and delete them.
func TestRLSConfigAndGRPCFromTheCommandLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cli(t, "certs", "-dir", dir, "-nodes", "n1")
	envoyToken, envoyEntry := newToken(t, "envoy", "decide")
	opsToken, opsEntry := newToken(t, "ops", "admin")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, envoyEntry, opsEntry)
	configs := filepath.Join(dir, "rls")
	if err := os.Mkdir(configs, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, yaml := range map[string]string{
		"edge.yaml":  "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: hour\n      requests_per_unit: 2\n      algorithm: token_bucket\n",
		"login.yaml": "domain: login\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 5, algorithm: token_bucket, burst: 3}\n",
	} {
		if err := os.WriteFile(filepath.Join(configs, name), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := startNode(t, ctx, []string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"),
		"-grpc", "127.0.0.1:0", "-rls-config", configs, "-auth", tokens,
		"-tls-cert", filepath.Join(dir, "n1.pem"), "-tls-key", filepath.Join(dir, "n1-key.pem")}, nil)
	grpcAddr := n.addrs.GRPC

	trust := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: caPool(t, filepath.Join(dir, "ca.pem"))}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(trust)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rl := ratelimitv3.NewRateLimitServiceClient(conn)
	req := &ratelimitv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitcommon.RateLimitDescriptor{{
		Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "192.0.2.7"}}}}}
	if _, err := rl.ShouldRateLimit(ctx, req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: %v, want UNAUTHENTICATED", err)
	}
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+envoyToken)
	for i, want := range []ratelimitv3.RateLimitResponse_Code{ratelimitv3.RateLimitResponse_OK, ratelimitv3.RateLimitResponse_OK, ratelimitv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := rl.ShouldRateLimit(authed, req)
		if err != nil || resp.OverallCode != want {
			t.Fatalf("call %d: %v, %v; want %v", i+1, resp.GetOverallCode(), err, want)
		}
	}

	remote := []string{"-addr", n.addr, "-ca", filepath.Join(dir, "ca.pem"), "-token", opsToken}
	if out := cli(t, append([]string{"rls", "list"}, remote...)...); out != "edge\nlogin\n" {
		t.Fatalf("rls list: %q", out)
	}
	if out := cli(t, append([]string{"rls", "get", "login"}, remote...)...); !strings.Contains(out, "algorithm: token_bucket") || !strings.Contains(out, "unit: DAY") {
		t.Fatalf("rls get login:\n%s", out)
	}
	raised := filepath.Join(dir, "edge-raised.yaml")
	if err := os.WriteFile(raised, []byte("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: token_bucket}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli(t, append([]string{"rls", "put", raised}, remote...)...)
	if resp, err := rl.ShouldRateLimit(authed, req); err != nil || resp.OverallCode != ratelimitv3.RateLimitResponse_OK {
		t.Fatalf("after raising the limit to 3: %v, %v", resp.GetOverallCode(), err)
	}
	if out := cli(t, append([]string{"rls", "delete", "edge"}, remote...)...); out != "deleted edge\n" {
		t.Fatalf("rls delete: %q", out)
	}
	if resp, err := rl.ShouldRateLimit(authed, req); err != nil || resp.Statuses[0].CurrentLimit != nil {
		t.Fatalf("a deleted domain still limits: %v, %v", resp, err)
	}
	cancel()
	if err := <-n.done; err != nil {
		t.Fatal(err)
	}
}

func TestBadRLSConfigStopsTheNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	if err := os.WriteFile(file, []byte("domain: edge\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"), "-rls-config", file}, env(nil), io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "descriptors[0].rate_limit.unit") || !strings.Contains(err.Error(), "line 5") {
		t.Fatalf("run = %v, want an error naming the field and line 5", err)
	}
}

// TestABrokenRLSConfigDoesNotStopARestart: a node that restarts into its
// cluster with a broken -rls-config starts, says what is wrong with the
// line, keeps the domain the cluster has, and applies the file once it is
// mended.
func TestABrokenRLSConfigDoesNotStopARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	writeFile(t, file, edgeConfig(2))
	args := []string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"), "-rls-config", file}
	ctx, cancel := context.WithCancel(context.Background())
	first := startNode(t, ctx, args, nil)
	cancel()
	if err := <-first.done; err != nil {
		t.Fatal(err)
	}
	writeFile(t, file, brokenEdgeConfig)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var logs testenv.SyncBuffer
	again := startLoggingTo(t, ctx, args, nil, &logs)
	c := client.New(nil, again.addr)
	limit := func() uint32 {
		cfg, err := c.GetRLSConfig(ctx, "edge")
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Descriptors[0].RateLimit.RequestsPerUnit
	}
	if got := limit(); got != 2 {
		t.Fatalf("edge at %d an hour after the restart, want the cluster's 2", got)
	}
	if l := logs.String(); !strings.Contains(l, "-rls-config is invalid") || !strings.Contains(l, "descriptors[0].rate_limit.unit: line 5") {
		t.Fatalf("the restarted node did not say what is wrong with -rls-config:\n%s", l)
	}
	writeFile(t, file, edgeConfig(3))
	testenv.WaitFor(t, "the mended file to be in force", func() bool { return limit() == 3 })
	cancel()
	if err := <-again.done; err != nil {
		t.Fatal(err)
	}
}

func TestRLSConfigIsNeededByANodeThatMayFormACluster(t *testing.T) {
	t.Parallel()
	withState := t.TempDir()
	writeFile(t, filepath.Join(withState, "raft.db"), "")
	for _, tc := range []struct {
		name string
		c    config
		want bool
	}{
		{"a node alone on an empty directory bootstraps", config{dataDir: t.TempDir()}, true},
		{"a node on an empty directory with -bootstrap-expect may form", config{dataDir: t.TempDir(), join: "a:7070,b:7070", expect: 2}, true},
		{"a node on an empty directory with -join only joins", config{dataDir: t.TempDir(), join: "a:7070"}, false},
		{"a node with a Raft log restarts", config{dataDir: withState}, false},
		{"a node with a Raft log and -bootstrap-expect restarts", config{dataDir: withState, join: "a:7070,b:7070", expect: 2}, false},
	} {
		if got := rlsConfigNeeded(tc.c); got != tc.want {
			t.Errorf("%s: rlsConfigNeeded = %v, want %v", tc.name, got, tc.want)
		}
	}
}
