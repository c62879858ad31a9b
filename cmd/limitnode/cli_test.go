package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// limitnodeCLI runs the built binary with args and no LIMITNODE_ variables,
// returning its output and exit status.
func limitnodeCLI(t *testing.T, bin string, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		status = exit.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errOut.String(), status
}

// TestTheCommandLineAgainstACluster drives every cluster subcommand of the
// binary against a real 3-node cluster: its output, and its exit status,
// including a denied allow (3), an unreachable address (1) and a bad flag
// (2).
func TestTheCommandLineAgainstACluster(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	addr := "-addr=127.0.0.1:1," + c.Followers()[0].HTTPAddr // the first is down: tried in turn
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policyFile, []byte(`{"limit":{"rate":100,"period":"1m"},"key_template":"{tenant}"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	backupFile := filepath.Join(dir, "cluster.backup")
	third := c.Followers()[1]
	tests := []struct {
		name       string
		args       []string
		wantStatus int
		wantOut    []string // each must appear in stdout
		wantErr    string   // must appear in stderr (one line)
	}{
		{"status", []string{"status", addr}, 0, []string{"NODE", "LEADER", leader.ID, "ready"}, ""},
		{"members", []string{"members", addr}, 0, []string{"ROLE", "n1", "n2", "n3", "leader", "follower"}, ""},
		{"status as JSON", []string{"status", addr, "-json"}, 0, []string{`"leader": "` + leader.ID + `"`}, ""},
		{"health", []string{"health", addr}, 0, []string{"ready"}, ""},
		{"flags before the command", []string{"-addr", strings.TrimPrefix(addr, "-addr="), "-json", "status"}, 0, []string{`"leader": "` + leader.ID + `"`}, ""},
		{"an allowed request", []string{"allow", addr, "-key", "cli", "-rate", "1", "-period", "1h"}, 0, []string{"allowed", "1h0m0s"}, ""},
		{"allow without a limit", []string{"allow", addr, "-key", "cli"}, exitUsage, nil, "allow needs -rate (an inline limit) or -policy"},
		{"a join naming another member's Raft address", []string{"join", addr, "-id", "n5", "-raft", leader.RaftAddr}, exitError, nil, `is "` + leader.ID + `", not "n5"`},
		{"a denied request", []string{"allow", addr, "-key", "cli", "-rate", "1", "-period", "1h"}, exitDenied, []string{"denied", "denied by check 0, an inline limit: token_bucket 1/1h (limit)"}, ""},
		{"keys get", []string{"keys", "get", "cli", addr}, 0, []string{"KEY", "cli", "(inline)", "token_bucket 1/1h"}, ""},
		{"keys list", []string{"keys", "list", "-prefix", "cl", addr}, 0, []string{"cli", "token_bucket 1/1h"}, ""},
		{"keys reset", []string{"keys", "reset", "cli", addr}, 0, []string{"reset cli (1 limits)"}, ""},
		{"allowed again after the reset", []string{"allow", addr, "-key", "cli", "-rate", "1", "-period", "1h"}, 0, []string{"allowed"}, ""},
		{"a reservation", []string{"allow", addr, "-key", "tokens", "-rate", "1000", "-period", "1h", "-cost", "500", "-settle", "1m"}, 0, []string{"allowed", "reserved: settle with limitnode settle s"}, ""},
		{"settle of no reservation", []string{"settle", "s0.0", "10", addr}, exitError, nil, "404 not_found"},
		{"settle with a bad cost", []string{"settle", "s0.0", "ten", addr}, exitUsage, nil, "COST must be an integer"},
		{"blocks put", []string{"blocks", "put", "cli", "-ttl", "1h", "-reason", "too many exports", addr}, 0, []string{"KEY", "cli", "operator", "too many exports"}, ""},
		{"blocks put without a ttl", []string{"blocks", "put", "cli", addr}, exitUsage, nil, "blocks put needs -ttl"},
		// ENDS IN may still read 1h0m0s: the node's estimate of cluster time need not have moved past the put's.
		{"blocks list", []string{"blocks", "list", addr}, 0, []string{"ENDS IN", "cli", "operator", "too many exports"}, ""},
		{"a blocked key", []string{"allow", addr, "-key", "cli", "-rate", "100", "-period", "1h"}, exitDenied, []string{"denied", "token_bucket 100/1h (block)", "blocked for 59m", "too many exports"}, ""},
		{"blocks delete", []string{"blocks", "delete", "cli", addr}, 0, []string{"lifted the block of cli"}, ""},
		{"blocks delete again", []string{"blocks", "delete", "cli", addr}, exitError, nil, "404 not_found"},
		{"blocks list when none are", []string{"blocks", "list", addr}, 0, []string{"no blocked keys"}, ""},
		{"keys get of a key without state", []string{"keys", "get", "nobody", addr}, exitError, nil, "404 not_found"},
		{"an invalid request", []string{"allow", addr, "-key", "cli", "-rate", "0"}, exitError, nil, "limit.rate"},
		{"policy put", []string{"policy", "put", "per-tenant", policyFile, addr}, 0, []string{"per-tenant", "token_bucket 100/1m", "{tenant}"}, ""},
		{"policy get", []string{"policy", "get", "per-tenant", addr}, 0, []string{"per-tenant"}, ""},
		{"policy list", []string{"policy", "list", addr}, 0, []string{"NAME", "per-tenant"}, ""},
		{"policy delete", []string{"policy", "delete", "per-tenant", addr}, 0, []string{"deleted per-tenant"}, ""},
		{"policy get of a deleted one", []string{"policy", "get", "per-tenant", addr}, exitError, nil, "404 not_found"},
		{"backup", []string{"backup", addr, "-o", backupFile}, 0, []string{backupFile, "INDEX"}, ""},
		{"restore", []string{"restore", addr, backupFile}, 0, []string{"RESTORED AT"}, ""},
		{"restore of a foreign file", []string{"restore", addr, policyFile}, exitError, nil, "400 invalid_argument"},
		{"remove", []string{"remove", addr, third.ID}, 0, []string{"removed " + third.ID}, ""},
		{"join", []string{"join", addr, "-id", third.ID, "-raft", third.RaftAddr, "-http", third.HTTPAddr}, 0, []string{"joined " + third.ID}, ""},
		{"transfer-leadership", []string{"transfer-leadership", addr, "-to", third.ID}, 0, []string{"leader is now " + third.ID}, ""},
		{"audit", []string{"audit", addr}, 0, []string{"INDEX", "(no token)", "policy.put", "per-tenant", "token_bucket 100 per 1m0s", "block.put", "cli", "key.reset", "restore", "member.remove", third.ID, "member.join", "leadership.transfer"}, ""},
		{"audit since an index", []string{"audit", addr, "-limit", "1", "-json"}, 0, []string{`"action": "member.join"`}, ""},
		{"an unreachable address", []string{"status", "-addr", "127.0.0.1:1"}, exitError, nil, "no node reachable"},
		{"a bad flag", []string{"status", "-bogus"}, exitUsage, nil, "flag provided but not defined: -bogus"},
		{"a missing argument", []string{"remove", addr}, exitUsage, nil, "want the member's ID"},
		{"an unknown policy verb", []string{"policy", "frobnicate"}, exitUsage, nil, "policy delete|get|list|put"},
	}
	for _, tt := range tests {
		stdout, stderr, status := limitnodeCLI(t, bin, tt.args...)
		if status != tt.wantStatus {
			t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", tt.name, status, tt.wantStatus, stdout, stderr)
			continue
		}
		for _, want := range tt.wantOut {
			if !strings.Contains(stdout, want) {
				t.Errorf("%s: stdout lacks %q:\n%s", tt.name, want, stdout)
			}
		}
		if tt.wantErr != "" && (!strings.Contains(stderr, tt.wantErr) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 && tt.wantStatus != exitUsage) {
			t.Errorf("%s: stderr %q, want one line mentioning %q", tt.name, stderr, tt.wantErr)
		}
		if strings.Contains(stderr, "limitnode: limitnode:") {
			t.Errorf("%s: stderr says limitnode twice: %q", tt.name, stderr)
		}
	}
	// Charge up front, then settle with less, twice: the second is the first's answer.
	out, _, _ := limitnodeCLI(t, bin, "allow", addr, "-key", "tokens-2", "-rate", "1000", "-period", "1h", "-cost", "500", "-settle", "1m", "-json")
	var reserved struct {
		SettlementID string `json:"settlement_id"`
	}
	if err := json.Unmarshal([]byte(out), &reserved); err != nil || reserved.SettlementID == "" {
		t.Fatalf("allow -settle -json: %q, %v", out, err)
	}
	for i, want := range []string{"SETTLEMENT", "settled before with this cost"} {
		stdout, stderr, status := limitnodeCLI(t, bin, "settle", reserved.SettlementID, "120", addr)
		if status != 0 || !strings.Contains(stdout, want) || !strings.Contains(stdout, "380") {
			t.Fatalf("settle %d: exit %d\n%s%s", i+1, status, stdout, stderr)
		}
	}
	members, _, _ := limitnodeCLI(t, bin, "members", addr)
	if i1, i2, i3 := strings.Index(members, "\nn1 "), strings.Index(members, "\nn2 "), strings.Index(members, "\nn3 "); i1 < 0 || i1 > i2 || i2 > i3 {
		t.Errorf("members are not listed in ID order:\n%s", members)
	}
	var st struct{ Leader string }
	stdout, _, _ := limitnodeCLI(t, bin, "status", addr, "-json")
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || st.Leader != third.ID {
		t.Fatalf("after the hand-over: %q, %v", stdout, err)
	}
}
