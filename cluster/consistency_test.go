package cluster_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// TestAReplicaThatDivergedIsFound: one follower's raft.db gets an entry
// rewritten into another valid one (what a bad disk or a bug could leave;
// its checksum is right), so after a restart its state differs from the
// others'. That used to go unnoticed, /readyz 200. Now the next checkpoint
// finds it: the follower answers /readyz 503, the leader's /v1/cluster marks
// it, and an on-demand check reports it alone as disagreeing. The leader
// makes it a non-voter, so that it cannot lead against its state; once its
// data is removed and it has caught up again, a checkpoint agrees and it is
// a voter again.
func TestAReplicaThatDivergedIsFound(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{Configure: func(cfg *cluster.Config) {
		cfg.ConsistencyCheckEvery = 200 * time.Millisecond
	}})
	for _, n := range c.Nodes {
		if a := decided(t, n.URL()+"/v1/allow", `{"key":"original-key","limit":{"rate":5,"period":"1h"}}`); a.status != 200 {
			t.Fatalf("allow: %d", a.status)
		}
	}
	c.WaitConverged()
	victim := c.Followers()[0]
	victim.Stop()
	rewriteEntry(t, filepath.Join(victim.DataDir, "raft.db"), "original-key")
	victim.Restart()

	testenv.WaitFor(t, "the diverged follower to say it is not ready", func() bool {
		status, body := do(t, "GET", victim.URL()+"/readyz", "")
		reason, _ := body["reason"].(string)
		return status == 503 && strings.Contains(reason, "differs from the leader's")
	})
	leader := c.WaitLeader()
	status, report := do(t, "POST", c.Nodes[2].URL()+"/v1/cluster/consistency", "")
	if status != 200 {
		t.Fatalf("consistency check: %d %v", status, report)
	}
	for _, m := range report["members"].([]any) {
		m := m.(map[string]any)
		want := m["id"] != victim.ID
		if m["agrees"] != want {
			t.Errorf("member %v agrees=%v, want %v", m["id"], m["agrees"], want)
		}
	}
	_, view := do(t, "GET", leader.URL()+"/v1/cluster", "")
	for _, n := range view["nodes"].([]any) {
		n := n.(map[string]any)
		if (n["diverged_at"] != nil) != (n["id"] == victim.ID) {
			t.Errorf("/v1/cluster: %v", n)
		}
	}
	testenv.WaitFor(t, "the leader to make the diverged member a non-voter", func() bool { return voter(t, leader, victim.ID) == "false" })
	// Asked to hand leadership to it, the leader used to send it Raft's
	// TimeoutNow: it stood for election, could not win, and the leader
	// answered 200 once the request's deadline passed, naming no new
	// leader. A non-voter cannot lead: the request is a 400 on "to".
	if status, body := do(t, "POST", leader.URL()+"/v1/cluster/transfer-leadership", fmt.Sprintf(`{"to":%q}`, victim.ID)); status != 400 || body["field"] != "to" || !strings.Contains(fmt.Sprint(body["error"]), "not a voter") {
		t.Fatalf("a transfer of leadership to the diverged member: %d %v; want a 400 on to saying it is not a voter", status, body)
	}
	if c.WaitLeader() == victim {
		t.Fatal("the diverged member took leadership")
	}

	victim.Kill()
	victim.DataDir = t.TempDir()
	victim.Restart()
	testenv.WaitFor(t, "the member, caught up from an empty directory, to be a voter again", func() bool {
		_, _ = do(t, "POST", leader.URL()+"/v1/cluster/consistency", "")
		return voter(t, c.WaitLeader(), victim.ID) == "true"
	})
	testenv.WaitFor(t, "the member to say it is ready", func() bool { status, _ := do(t, "GET", victim.URL()+"/readyz", ""); return status == 200 })
}

// voter is "true" or "false" as the node's /v1/cluster says of member id.
func voter(t *testing.T, n *testcluster.Node, id string) string {
	t.Helper()
	_, view := do(t, "GET", n.URL()+"/v1/cluster", "")
	for _, m := range view["nodes"].([]any) {
		if m := m.(map[string]any); m["id"] == id {
			return fmt.Sprint(m["voter"])
		}
	}
	return ""
}

// rewriteEntry replaces, in a stopped node's raft.db, the allow entry that
// holds key with a valid entry for another key.
func rewriteEntry(t *testing.T, path, key string) {
	t.Helper()
	store, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	limit := algorithms.Limit{Rate: 5, Period: time.Hour, Burst: 5}
	for i := first; i <= last; i++ {
		var entry raft.Log
		if err := store.GetLog(i, &entry); err != nil {
			t.Fatal(err)
		}
		if entry.Type != raft.LogCommand || !bytes.Contains(entry.Data, []byte(key)) {
			continue
		}
		entry.Data, err = fsm.Encode(fsm.CommandAllow, &fsm.AllowCommand{NowNanos: time.Now().UnixNano(),
			Requests: []fsm.Request{{Checks: []fsm.Check{fsm.CheckOf(contract.Check{Key: "rewritten-key", Limit: limit, Cost: 5})}}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.StoreLog(&entry); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no entry holds %q", key)
}
