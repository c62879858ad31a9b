package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/client"
)

// TestTheJoinTokenCanStayOffTheCommandLine starts a cluster with tokens and
// joins it three ways: n2 with -join-token-file naming the file `limitnode
// token` wrote (the token is its first line), n3 with LIMITNODE_JOIN_TOKEN,
// n4 with -join-token on the command line, where every local user can read
// it with ps. All three join; only n4 warns, naming the other two ways.
func TestTheJoinTokenCanStayOffTheCommandLine(t *testing.T) {
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
		id      string
		args    []string
		vars    map[string]string
		warnsPS bool
	}{
		{"n2", []string{"-join", n1.addr, "-join-token-file", tokenFile}, nil, false},
		{"n3", []string{"-join", n1.addr}, map[string]string{"LIMITNODE_JOIN_TOKEN": token}, false},
		{"n4", []string{"-join", n1.addr, "-join-token", token}, nil, true},
	}
	for _, j := range joiners {
		logs := &syncBuffer{}
		startLoggingTo(t, ctx, node(j.id, j.args...), j.vars, logs)
		warned := strings.Contains(logs.String(), "level=WARN msg=\"-join-token on the command line")
		if warned != j.warnsPS {
			t.Errorf("%s warned about ps: %v, want %v:\n%s", j.id, warned, j.warnsPS, logs.String())
		}
		if warned && (!strings.Contains(logs.String(), "-join-token-file") || !strings.Contains(logs.String(), "LIMITNODE_JOIN_TOKEN")) {
			t.Errorf("%s's warning names neither -join-token-file nor LIMITNODE_JOIN_TOKEN:\n%s", j.id, logs.String())
		}
		if strings.Contains(logs.String(), token) {
			t.Errorf("%s logged the token", j.id)
		}
	}
	st, err := client.NewWithOptions(client.Options{Token: token}, n1.addr).Cluster(ctx)
	if err != nil || len(st.Nodes) != 4 {
		t.Fatalf("the cluster after the joins: %+v, %v", st, err)
	}
}

// TestABadJoinTokenFileStopsTheNode: a missing or empty -join-token-file,
// or one given with -join-token, stops the node with one line naming it.
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
		wantStatus        int
	}{
		{"a missing file", "nope.token", []string{"-join-token-file", filepath.Join(dir, "nope.token")}, exitError},
		{"an empty file", "empty.token", []string{"-join-token-file", empty}, exitError},
		{"both ways at once", "-join-token and -join-token-file", []string{"-join-token-file", empty, "-join-token", "ln_x"}, exitUsage},
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
