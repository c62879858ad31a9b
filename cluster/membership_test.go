package cluster_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// members returns the leader's configuration as "id@raft-address", sorted.
func members(t *testing.T, c *testcluster.Cluster) []string {
	t.Helper()
	var out []string
	for _, m := range c.WaitLeader().Node().Status().Members {
		out = append(out, m.ID+"@"+m.RaftAddr)
	}
	slices.Sort(out)
	return out
}

// standby opens a node that belongs to no cluster yet (no bootstrap), as a
// node started with -join is before its join is accepted: one that would
// get past c's TLS, as a node of c's operator would.
func standby(t *testing.T, c *testcluster.Cluster, id string) *cluster.Node {
	t.Helper()
	n, err := cluster.Open(cluster.Config{ID: id, RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(), NodeTLS: c.NodeTLS(id)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// TestARefusedJoinChangesNothing: on a healthy cluster, a join that names
// another member's Raft address, a dead address, or a running member's ID
// at a new address is refused with the field at fault, and every member
// stays where it was.
func TestARefusedJoinChangesNothing(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	before := members(t, c)
	n2, n3 := c.Nodes[1], c.Nodes[2]
	second := standby(t, c, "n2")
	foreign, err := cluster.Open(cluster.Config{ID: "n7", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(), Bootstrap: true, NodeTLS: c.NodeTLS("n7")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { foreign.Close() })
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantField  string
		wantIn     string
	}{
		{"an existing ID at another member's Raft address", fmt.Sprintf(`{"id":"n2","raft_addr":%q}`, n3.RaftAddr), 400, "id", `is "n3", not "n2"`},
		{"a new ID at a member's Raft address", fmt.Sprintf(`{"id":"n5","raft_addr":%q}`, n2.RaftAddr), 400, "id", `is "n2", not "n5"`},
		{"an address where nothing answers", `{"id":"n9","raft_addr":"127.0.0.1:1"}`, 400, "raft_addr", "does not answer"},
		{"a second node with a running member's ID", fmt.Sprintf(`{"id":"n2","raft_addr":%q}`, second.RaftAddr()), 409, "id", `member "n2" is running at ` + n2.RaftAddr},
		{"a node of another cluster", fmt.Sprintf(`{"id":"n7","raft_addr":%q}`, foreign.RaftAddr()), 409, "raft_addr", "belongs to cluster " + foreign.ClusterID()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, via := range []*testcluster.Node{c.WaitLeader(), c.Followers()[0]} {
				status, body := do(t, "POST", via.URL()+"/v1/cluster/join", tt.body)
				if status != tt.wantStatus || body["field"] != tt.wantField || !strings.Contains(fmt.Sprint(body["error"]), tt.wantIn) {
					t.Fatalf("via %s: %d %v, want %d with field %q and %q", via.ID, status, body, tt.wantStatus, tt.wantField, tt.wantIn)
				}
				if after := members(t, c); !slices.Equal(after, before) {
					t.Fatalf("via %s: the members went from %v to %v", via.ID, before, after)
				}
			}
		})
	}
	if got := n2.Node().Ready(); got != "" {
		t.Fatalf("n2 is not ready after the refused joins: %s", got)
	}
}

// TestReplacingARunningMemberIsExplicit: with "replace": true the join of a
// second node under a running follower's ID goes through, and the old entry
// is gone.
func TestReplacingARunningMemberIsExplicit(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	old := c.Followers()[0]
	second := standby(t, c, old.ID)
	// A join whose outcome is unknown (an election on a loaded machine) is
	// asked again: made, it is no change the second time.
	var status int
	var body map[string]any
	testenv.WaitFor(t, "the join with replace to be answered", func() bool {
		status, body = do(t, "POST", leader.URL()+"/v1/cluster/join", fmt.Sprintf(`{"id":%q,"raft_addr":%q,"replace":true}`, old.ID, second.RaftAddr()))
		return status != http.StatusServiceUnavailable
	})
	if status != 200 {
		t.Fatalf("join with replace: %d %v", status, body)
	}
	// The replaced node is no member any more: no leader speaks to it, so
	// it cannot agree with the others on one. Its operator stops it.
	old.Kill()
	want := []string{old.ID + "@" + second.RaftAddr()}
	for _, n := range c.Nodes {
		if n != old {
			want = append(want, n.ID+"@"+n.RaftAddr)
		}
	}
	slices.Sort(want)
	if got := members(t, c); !slices.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
}

// TestAChangeThatWouldCostTheQuorumIsRefused: with one follower down,
// removing the other would leave the leader alone of two voters; it is
// refused, naming the one down, until forced. Forced, the leader waits for
// it, and its /readyz says so.
func TestAChangeThatWouldCostTheQuorumIsRefused(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	followers := c.Followers()
	down, live := followers[0], followers[1]
	down.Kill()
	before := members(t, c)
	status, body := do(t, "DELETE", leader.URL()+"/v1/cluster/nodes/"+live.ID, "")
	if status != 409 || !strings.Contains(fmt.Sprint(body["error"]), "not answering: "+down.ID+" at "+down.RaftAddr) {
		t.Fatalf("DELETE %s with %s down: %d %v, want 409 naming %s", live.ID, down.ID, status, body, down.ID)
	}
	if after := members(t, c); !slices.Equal(after, before) {
		t.Fatalf("the refused removal changed the members from %v to %v", before, after)
	}
	if status, body := do(t, "DELETE", leader.URL()+"/v1/cluster/nodes/"+live.ID+"?force=maybe", ""); status != 400 || body["field"] != "force" {
		t.Fatalf("force=maybe: %d %v", status, body)
	}
	// Raft counts a configuration from the moment it is appended, so the
	// removal itself needs the member that is down: it may not commit in
	// time for an answer (503), but it is under way.
	if status, body := do(t, "DELETE", leader.URL()+"/v1/cluster/nodes/"+live.ID+"?force=true", ""); status != 200 && body["code"] != "unavailable" {
		t.Fatalf("forced removal: %d %v", status, body)
	}
	testenv.WaitFor(t, "the leader to say it waits for "+down.ID, func() bool {
		status, body := do(t, "GET", leader.URL()+"/readyz", "")
		return status == 503 && strings.Contains(fmt.Sprint(body["reason"]), "not answering: "+down.ID+" at "+down.RaftAddr)
	})
}

// TestATransferToALaggingVoterIsAConflict cuts a follower off, so that it
// trails the leader's log, and asks over HTTP to hand leadership to it: Raft
// gives up once the election timeout passes, and the answer is a 409 that
// names the follower (not a 500), with the leader still leading. (Once the
// follower is back, the leader's replication to it resumes only after its
// back-off, up to tens of seconds, so a retry's success is Raft's timing.)
func TestATransferToALaggingVoterIsAConflict(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	lagging := c.Followers()[0]
	c.Isolate(lagging)
	if status, body := do(t, "PUT", leader.URL()+"/v1/policies/written-while-cut-off", `{"limit":{"rate":1,"period":"1h"}}`); status != 200 {
		t.Fatalf("PUT policy: %d %v", status, body)
	}
	status, body := do(t, "POST", leader.URL()+"/v1/cluster/transfer-leadership", `{"to":"`+lagging.ID+`"}`)
	if status != 409 || body["code"] != "conflict" || body["field"] != "to" || !strings.Contains(fmt.Sprint(body["error"]), lagging.ID+" did not take over leadership") {
		t.Fatalf("a transfer to %s, cut off: %d %v, want a 409 naming it", lagging.ID, status, body)
	}
	if !leader.Node().IsLeader() {
		t.Fatalf("after the refused transfer %s no longer leads", leader.ID)
	}
}
