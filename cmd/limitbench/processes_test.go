package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestProcessModeMeasuresThreeLimitnodeProcesses runs the tool as a user
// would, without -in-process: it builds the binary, starts three
// processes of it, measures decisions over HTTP and gRPC through them,
// closed and open loop, reads each process's CPU time, and stops them.
func TestProcessModeMeasuresThreeLimitnodeProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "out.json")
	var table strings.Builder
	args := []string{"-targets", "http,grpc,http-nostats", "-callers", "2", "-rates", "20", "-open-callers", "2",
		"-duration", "1s", "-warmup", "100ms", "-json", path}
	if err := run(args, &table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "skipping http-nostats: it runs only with -in-process") {
		t.Errorf("table does not say why http-nostats was skipped:\n%s", table.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Results []result
		Safe    []envoySafe `json:"envoy_safe_rates"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Results) != 4 || len(out.Safe) != 2 {
		t.Fatalf("results %s, %v", data, err)
	}
	pids := map[int]bool{}
	for _, r := range out.Results {
		if r.Where != whereProcesses || r.Decisions == 0 || r.Errors != 0 || r.Samples == 0 {
			t.Errorf("%s %s: %+v", r.Target, r.point(), r)
		}
		leaders := 0
		for _, c := range r.servers() {
			if c.PID == os.Getpid() || !strings.HasPrefix(c.Name, "n") {
				t.Errorf("%s: server %+v is not a node process", r.Target, c)
			}
			pids[c.PID] = true
			if strings.HasSuffix(c.Name, " (leader)") {
				leaders++
			}
		}
		if len(r.servers()) != 3 || leaders != 1 {
			t.Errorf("%s: servers %+v, want three nodes, one the leader", r.Target, r.servers())
		}
		// The stages come from the nodes' own /metrics pages.
		committed := false
		for _, s := range r.Stages {
			committed = committed || (s.Stage == "raft_commit" && strings.HasSuffix(s.Node, " (leader)") && s.Count > 0)
		}
		if !committed {
			t.Errorf("%s: stages %+v, want the leader's raft_commit", r.Target, r.Stages)
		}
	}
	// One cluster served every target; it is gone once the run is.
	if len(pids) != 3 {
		t.Errorf("node processes %v, want the same three throughout", pids)
	}
	for pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("node process %d still there after the run (%v)", pid, err)
		}
	}
}
