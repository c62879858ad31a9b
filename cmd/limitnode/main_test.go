package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// defaultConfig is the configuration of no flags, changed by change.
func defaultConfig(change func(*config)) config {
	c := config{id: "node1", httpAddr: "127.0.0.1:7070", raftAddr: "127.0.0.1:7071", dataDir: "./limitnode-data", logLevel: "info", raftLogLevel: "warn",
		joinTimeout: time.Minute, maxKeys: 5_000_000, keyLimitMode: "deny", maxWaitPerCaller: time.Minute, maxLeasesPerCaller: 100_000, maxRequestIDsPerCaller: 262_144, denyLeaseCap: time.Second, maxRaftConns: connCap{n: 1024}, raftIdle: 2 * time.Minute,
		maxHTTPConns: connCap{n: 10000}, maxConnsPerClient: connCap{n: 256}, untrustedIdle: 10 * time.Second, trusted: "127.0.0.0/8,::1"}
	if change != nil {
		change(&c)
	}
	return c
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    config
		wantErr bool
	}{
		{
			name: "no flags gives a single local node",
			want: defaultConfig(nil),
		},
		{
			name: "environment variables set flags",
			env:  map[string]string{"LIMITNODE_ID": "n2", "LIMITNODE_HTTP": "127.0.0.1:7002", "LIMITNODE_JOIN": "127.0.0.1:7001", "LIMITNODE_LOG_LEVEL": "debug"},
			want: defaultConfig(func(c *config) {
				c.id, c.httpAddr, c.join, c.logLevel = "n2", "127.0.0.1:7002", "127.0.0.1:7001", "debug"
			}),
		},
		{
			name: "a flag on the command line wins over its variable",
			args: []string{"-id", "from-flag", "-data", "d1"},
			env:  map[string]string{"LIMITNODE_ID": "from-env"},
			want: defaultConfig(func(c *config) { c.id, c.dataDir = "from-flag", "d1" }),
		},
		{
			name: "snapshots in their own directory",
			args: []string{"-snapshot-dir", "/mnt/snaps"},
			want: defaultConfig(func(c *config) { c.snapshotDir = "/mnt/snaps" }),
		},
		{
			name: "nodes that form their cluster together",
			args: []string{"-bootstrap-expect", "3", "-join", "a:7070,b:7070,c:7070", "-raft", "0.0.0.0:7071", "-advertise-raft", "a:7071"},
			want: defaultConfig(func(c *config) {
				c.expect, c.join, c.raftAddr, c.advertiseRaft = 3, "a:7070,b:7070,c:7070", "0.0.0.0:7071", "a:7071"
			}),
		},
		{name: "bad trusted proxies are an error", args: []string{"-trusted-proxies", "10.0.0.0/8,example.com"}, wantErr: true},
		{name: "-bootstrap-expect without -join is an error", args: []string{"-bootstrap-expect", "3"}, wantErr: true},
		{name: "-join naming more nodes than -bootstrap-expect is an error", args: []string{"-bootstrap-expect", "2", "-join", "a:7070,b:7070,c:7070"}, wantErr: true},
		{name: "a negative -bootstrap-expect is an error", args: []string{"-bootstrap-expect", "-1", "-join", "a:7070"}, wantErr: true},
		{name: "raft on every interface without -advertise-raft is an error", args: []string{"-raft", ":7071"}, wantErr: true},
		{name: "an advertised Raft address on every interface is an error", args: []string{"-advertise-raft", "0.0.0.0:7071"}, wantErr: true},
		{name: "an advertised Raft address without a host is an error", args: []string{"-advertise-raft", ":7071"}, wantErr: true},
		{
			name: "an advertised Raft address may take the port listened on",
			args: []string{"-raft", "0.0.0.0:0", "-advertise-raft", "my-host:0", "-addr-file", "addrs.json"},
			want: defaultConfig(func(c *config) { c.raftAddr, c.advertiseRaft, c.addrFile = "0.0.0.0:0", "my-host:0", "addrs.json" }),
		},
		{name: "a bad variable is an error", env: map[string]string{"LIMITNODE_JOIN_TIMEOUT": "forever"}, wantErr: true},
		{name: "an unknown key limit mode is an error", args: []string{"-key-limit-mode", "maybe"}, wantErr: true},
		{name: "an unknown flag is an error", args: []string{"-color"}, wantErr: true},
		{name: "a stray argument is an error", args: []string{"start"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseConfig(tt.args, env(tt.env), io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestThreeNodesFromTheCommandLine starts three nodes as the README's cluster
// starts (here the second configured through environment variables, the third
// joining through a follower), checks that they form one cluster that
// decides on every node, and that cancelling (SIGINT/SIGTERM) stops each
// with no error.
func TestThreeNodesFromTheCommandLine(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n1 := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir()}, nil)
	n2 := startNode(t, ctx, nil, map[string]string{
		"LIMITNODE_ID": "n2", "LIMITNODE_HTTP": "127.0.0.1:0", "LIMITNODE_RAFT": "127.0.0.1:0",
		"LIMITNODE_DATA": t.TempDir(), "LIMITNODE_JOIN": n1.addr,
	})
	n3 := startNode(t, ctx, []string{"-id", "n3", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(), "-join", "127.0.0.1:1," + n2.addr}, nil)

	testenv.WaitFor(t, "n3 to see three members, each with its HTTP address, and a leader", func() bool {
		st, err := client.New(nil, n3.addr).Cluster(ctx)
		return err == nil && len(st.Nodes) == 3 && st.Leader != "" && allHaveHTTPAddrs(st)
	})

	limit := &client.Limit{Rate: 2, Period: time.Hour}
	var allowed int
	for _, n := range []running{n1, n2, n3} {
		d, err := client.New(nil, n.addr).Allow(ctx, client.AllowRequest{Key: "cli", Limit: limit})
		if err != nil {
			t.Fatalf("allow on %s: %v", n.addr, err)
		}
		if d.Allowed {
			allowed++
		} else if d.StatusCode != 429 || d.RetryAfter < time.Second {
			t.Fatalf("denied with status %d and Retry-After %s", d.StatusCode, d.RetryAfter)
		}
	}
	if allowed != 2 {
		t.Fatalf("%d of 3 allowed under a limit of 2", allowed)
	}

	cancel()
	for _, n := range []running{n3, n2, n1} {
		select {
		case err := <-n.done:
			if err != nil {
				t.Fatalf("node %s stopped with %v", n.addr, err)
			}
		case <-time.After(testenv.WaitTimeout):
			t.Fatalf("node %s did not stop", n.addr)
		}
	}
}

func allHaveHTTPAddrs(st client.ClusterStatus) bool {
	for _, n := range st.Nodes {
		if n.HTTPAddr == "" {
			return false
		}
	}
	return true
}

// TestPolicyFileSeedsABootstrappedCluster starts a node with -policies and
// finds the file's policies in force.
func TestPolicyFileSeedsABootstrappedCluster(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "policies.json")
	const policies = `{"policies": {
		"per-key": {"limit": {"rate": 2, "period": "1h"}},
		"per-route": {"limit": {"algorithm": "sliding_window_counter", "rate": 100, "period": "1m"}, "key_template": "{api_key}:{route}", "shadow": true}
	}}`
	if err := os.WriteFile(file, []byte(policies), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := startNode(t, ctx, []string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"), "-policies", file}, nil)
	c := client.New(nil, n.addr)
	for i, want := range []bool{true, true, false} {
		d, err := c.Allow(ctx, client.AllowRequest{Key: "k", Policy: "per-key"})
		if err != nil || d.Allowed != want {
			t.Fatalf("request %d: %+v, %v; want allowed=%v", i, d, err, want)
		}
	}
	cancel()
	if err := <-n.done; err != nil {
		t.Fatal(err)
	}
}

func TestBadPolicyFileStopsTheNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "policies.json")
	if err := os.WriteFile(file, []byte(`{"policies": {"p": {"limit": {"rate": 0}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"), "-policies", file}, env(nil), io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "limit.rate") {
		t.Fatalf("run = %v, want an error naming limit.rate", err)
	}
}

// TestExitStatuses: help is a success, a mistake in the command line a
// usage error said once, an unknown command a usage error naming it.
func TestExitStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantStatus int
		wantInErr  string
	}{
		{"help", []string{"-h"}, nil, exitOK, "can also be set as LIMITNODE_<NAME>"},
		{"an unknown flag", []string{"-color"}, nil, exitUsage, "flag provided but not defined: -color"},
		{"an unknown command", []string{"launch"}, nil, exitUsage, `unknown command "launch"`},
		{"a bad variable names itself and the flag", nil, map[string]string{"LIMITNODE_JOIN_TIMEOUT": "forever"}, exitUsage, `LIMITNODE_JOIN_TIMEOUT="forever" is not a valid value for -join-timeout`},
		{"help of a subcommand", []string{"certs", "-h"}, nil, exitOK, "Usage: limitnode certs"},
		{"a token with an unknown role", []string{"token", "-roles", "root"}, nil, exitUsage, `unknown role "root"`},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		status := dispatch(context.Background(), tt.args, env(tt.env), io.Discard, &stderr)
		if status != tt.wantStatus || !strings.Contains(stderr.String(), tt.wantInErr) || strings.Count(stderr.String(), tt.wantInErr) != 1 {
			t.Errorf("%s: exit %d, %q; want exit %d mentioning %q once", tt.name, status, stderr.String(), tt.wantStatus, tt.wantInErr)
		}
	}
}

// TestRoughEdgesOfTheBinary: a node on every interface advertises an address
// others can dial, not [::]; a second node on a data directory in use says
// so; a Raft port on every interface needs -advertise-raft, which then names
// the node in the cluster (with the port listened on, given port 0) and
// lends its host to the HTTP address.
func TestRoughEdgesOfTheBinary(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	n := startNode(t, ctx, []string{"-http", "0.0.0.0:0", "-raft", "127.0.0.1:0", "-data", dir}, nil)
	_, port, _ := net.SplitHostPort(n.addr)
	var st client.ClusterStatus
	testenv.WaitFor(t, "the node to record its HTTP address", func() bool {
		var err error
		st, err = client.New(nil, "127.0.0.1:"+port).Cluster(ctx)
		return err == nil && len(st.Nodes) == 1 && st.Nodes[0].HTTPAddr != ""
	})
	if st.Nodes[0].HTTPAddr != "127.0.0.1:"+port {
		t.Errorf("a node listening on 0.0.0.0 advertises %+v, want 127.0.0.1:%s", st.Nodes, port)
	}
	err := run(ctx, []string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", dir}, env(nil), io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Errorf("a second node on the same data directory: %v", err)
	}
	err = run(ctx, []string{"-http", "127.0.0.1:0", "-raft", "0.0.0.0:0", "-data", t.TempDir()}, env(nil), io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "give -advertise-raft") {
		t.Errorf("a Raft port on every interface without -advertise-raft: %v", err)
	}

	wide := startNode(t, ctx, []string{"-id", "wide", "-http", "0.0.0.0:0", "-raft", "0.0.0.0:0", "-advertise-raft", "localhost:0", "-data", t.TempDir()}, nil)
	_, httpPort, _ := net.SplitHostPort(wide.addr)
	_, raftPort, _ := net.SplitHostPort(wide.addrs.Raft)
	if wide.addrs.AdvertisedRaft != "localhost:"+raftPort || wide.addrs.AdvertisedHTTP != "localhost:"+httpPort {
		t.Errorf("a node on every interface with -advertise-raft localhost:0 advertises %+v, want localhost with the ports it listens on", wide.addrs)
	}
	testenv.WaitFor(t, "the node on every interface to lead", func() bool {
		s, err := client.New(nil, "127.0.0.1:"+httpPort).Cluster(ctx)
		return err == nil && s.SelfRaftAddr == "localhost:"+raftPort && len(s.Nodes) == 1 &&
			s.Nodes[0].RaftAddr == "localhost:"+raftPort && s.Nodes[0].HTTPAddr == "localhost:"+httpPort && s.Leader == "wide"
	})
	cancel()
	for _, r := range []running{n, wide} {
		if err := <-r.done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestClashingPortsAreNamed: two of the node's listeners on one port are a
// usage error naming both flags, before anything is created; a Raft port
// that is taken leaves no empty data directory behind.
func TestClashingPortsAreNamed(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	var stderr bytes.Buffer
	status := dispatch(context.Background(), []string{"-http", "127.0.0.1:7999", "-raft", "127.0.0.1:7999", "-data", data}, env(nil), io.Discard, &stderr)
	if status != exitUsage || !strings.Contains(stderr.String(), "-http 127.0.0.1:7999 and -raft 127.0.0.1:7999 name the same port") {
		t.Fatalf("exit %d, %q; want a usage error naming both", status, stderr.String())
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	err = run(context.Background(), []string{"-http", "127.0.0.1:0", "-raft", taken.Addr().String(), "-data", data}, env(nil), io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "listen for raft") {
		t.Fatalf("a Raft port in use: %v", err)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed start left %s behind (%v)", data, err)
	}
}

// TestASeedFileNotAppliedIsAWarning: a node that restarts with -policies
// does not store them again, and says so at WARN with the command that
// would.
func TestASeedFileNotAppliedIsAWarning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "policies.json")
	if err := os.WriteFile(file, []byte(`{"policies": {"p": {"limit": {"rate": 2, "period": "1h"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"), "-policies", file}
	ctx, cancel := context.WithCancel(context.Background())
	first := startNode(t, ctx, args, nil)
	cancel()
	if err := <-first.done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var logs testenv.SyncBuffer
	again := startLoggingTo(t, ctx, args, nil, &logs)
	cancel()
	if err := <-again.done; err != nil {
		t.Fatal(err)
	}
	if l := logs.String(); !strings.Contains(l, `level=WARN msg="-policies NOT applied`) || !strings.Contains(l, "limitnode policy put NAME FILE") {
		t.Fatalf("the restarted node did not warn that its seed files are not applied:\n%s", l)
	}
}
