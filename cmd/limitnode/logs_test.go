package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
)

// startLogged starts a node whose log goes to the returned buffer.
func startLogged(t *testing.T, ctx context.Context, args []string) (running, *testenv.SyncBuffer) {
	t.Helper()
	logs := &testenv.SyncBuffer{}
	return startLoggingTo(t, ctx, args, nil, logs), logs
}

func alarms(logs string) []string {
	var out []string
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			out = append(out, line)
		}
	}
	return out
}

// TestLogsDoNotAlarmOnAHealthyCluster: three nodes start, form a cluster and
// decide without a single warning; with one of them stopped, the others say
// so once per peer and kind, not several times a second, and never as an
// error; at debug level each request is logged with the node that decided.
func TestLogsDoNotAlarmOnAHealthyCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n3ctx, stopN3 := context.WithCancel(ctx)
	defer stopN3()
	node := func(id string, join string) []string {
		args := []string{"-id", id, "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(), "-log-level", "debug"}
		if join != "" {
			args = append(args, "-join", join)
		}
		return args
	}
	n1, logs1 := startLogged(t, ctx, node("n1", ""))
	n2, logs2 := startLogged(t, ctx, node("n2", n1.addr))
	n3, logs3 := startLogged(t, n3ctx, node("n3", n1.addr))
	testenv.WaitFor(t, "three members", func() bool {
		st, err := client.New(nil, n3.addr).Cluster(ctx)
		return err == nil && len(st.Nodes) == 3 && st.Leader != ""
	})
	if _, err := client.New(nil, n2.addr).Allow(ctx, client.AllowRequest{Key: "k", Limit: &client.Limit{Rate: 5, Period: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*testenv.SyncBuffer{logs1, logs2, logs3} {
		if a := alarms(l.String()); len(a) > 0 {
			t.Errorf("a healthy start logged warnings:\n%s", strings.Join(a, "\n"))
		}
	}
	if !strings.Contains(logs2.String(), `msg="http request" method=POST route=/v1/allow status=200`) || !strings.Contains(logs2.String(), "decided_by=n1") {
		t.Errorf("no access log line for the decision on n2:\n%s", logs2.String())
	}

	stopN3()
	<-n3.done
	// Raft retries an unreachable peer several times a second; give it
	// three seconds of that.
	deadline := time.Now().Add(3 * time.Second)
	testenv.WaitFor(t, "three seconds with n3 down", func() bool { return time.Now().After(deadline) })
	seen := map[string]int{}
	for _, line := range alarms(logs1.String()) {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("an unreachable peer logged an error: %s", line)
		}
		msg, _, _ := strings.Cut(line[strings.Index(line, "msg="):], " node=")
		seen[msg+" about "+peerIn(line)]++
	}
	for msg, n := range seen {
		if n > 1 {
			t.Errorf("%d lines of %s in 3 s, want one per peer", n, msg)
		}
	}
}

// peerIn is the peer a log line of Raft's is about: n3, the node down, or
// on a loaded machine another that was slow to answer once.
func peerIn(line string) string {
	for _, attr := range []string{"server-id=", "peer=", "target="} {
		if _, v, ok := strings.Cut(line, " "+attr); ok {
			if quoted, ok := strings.CutPrefix(v, `"`); ok { // peer="{Suffrage:Voter ID:n3 Address:...}"
				v, _, _ = strings.Cut(quoted, `"`)
				return v
			}
			v, _, _ = strings.Cut(v, " ")
			return v
		}
	}
	return ""
}
