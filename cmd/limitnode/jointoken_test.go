package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
)

// TestTheJoinTokenStaysOffTheCommandLine starts a cluster with tokens and
// joins it two ways: n2 with -join-token-file naming the file `limitnode
// token` wrote (the token is its first line), n3 with LIMITNODE_JOIN_TOKEN.
// Both join, and neither logs the token. n4, with -join-token on the
// command line, where every local user could read it with ps for as long
// as the node runs, is refused at start with a usage error naming the two
// other ways, before it joins or logs anything.
func TestTheJoinTokenStaysOffTheCommandLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token, entry := newToken(t, "ops", "admin")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, entry)
	tokenFile := filepath.Join(dir, "ops.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"+entry+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := func(id string, more ...string) []string {
		return append([]string{"-id", id, "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(), "-auth", tokens}, more...)
	}
	n1 := startNode(t, ctx, node("n1"), nil)
	joiners := []struct {
		id   string
		args []string
		vars map[string]string
	}{
		{"n2", []string{"-join", n1.addr, "-join-token-file", tokenFile}, nil},
		{"n3", []string{"-join", n1.addr}, map[string]string{"LIMITNODE_JOIN_TOKEN": token}},
	}
	for _, j := range joiners {
		logs := &testenv.SyncBuffer{}
		startLoggingTo(t, ctx, node(j.id, j.args...), j.vars, logs)
		if strings.Contains(logs.String(), token) {
			t.Errorf("%s logged the token", j.id)
		}
	}
	var stderr bytes.Buffer
	// A node that started would run until its context ends, and then exit 0.
	started, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	status := dispatch(started, node("n4", "-join", n1.addr, "-join-token", token), env(nil), io.Discard, &stderr)
	out := strings.TrimSpace(stderr.String())
	if status != exitUsage || !strings.Contains(out, "-join-token is refused on the command line") ||
		!strings.Contains(out, "-join-token-file") || !strings.Contains(out, "LIMITNODE_JOIN_TOKEN") || strings.Contains(out, token) {
		t.Errorf("-join-token on the command line: exit %d, %q; want a usage error naming -join-token-file and LIMITNODE_JOIN_TOKEN, without the token", status, out)
	}
	st, err := client.NewWithOptions(client.Options{Token: token}, n1.addr).Cluster(ctx)
	if err != nil || len(st.Nodes) != 3 {
		t.Fatalf("the cluster after the joins: %+v, %v", st, err)
	}
}

// TestABadJoinTokenFileStopsTheNode: a missing or empty -join-token-file,
// or one given with LIMITNODE_JOIN_TOKEN too, stops the node with one line
// naming it.
func TestABadJoinTokenFileStopsTheNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.token")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, wantInError string
		args              []string
		vars              map[string]string
		wantStatus        int
	}{
		{"a missing file", "nope.token", []string{"-join-token-file", filepath.Join(dir, "nope.token")}, nil, exitError},
		{"an empty file", "empty.token", []string{"-join-token-file", empty}, nil, exitError},
		{"both ways at once", "-join-token and -join-token-file", []string{"-join-token-file", empty}, map[string]string{"LIMITNODE_JOIN_TOKEN": "ln_x"}, exitUsage},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		args := append([]string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir()}, tt.args...)
		status := dispatch(context.Background(), args, env(tt.vars), io.Discard, &stderr)
		out := strings.TrimSpace(stderr.String())
		if status != tt.wantStatus || !strings.Contains(out, tt.wantInError) || strings.Count(out, "\n") > 0 {
			t.Errorf("%s: exit %d, %q; want exit %d and one line mentioning %q", tt.name, status, out, tt.wantStatus, tt.wantInError)
		}
	}
}
