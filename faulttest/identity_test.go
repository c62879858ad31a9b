package faulttest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// TestANodeOnAnotherClustersDirectoryCannotSplitTheCluster is the
// foreign-directory case: n3 of a three-node cluster R is restarted on the
// data directory of a one-node cluster F whose node is also called n3 (and
// whose term is higher). R's nodes and it refuse each other on every
// connection, so it cannot force an election in R, join it, or be elected
// by it, even while R's leader is cut off; it says in /readyz that it is
// not where it should run; and a key limited to 2 admits 2 across R.
func TestANodeOnAnotherClustersDirectoryCannotSplitTheCluster(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	foreignDir := oneNodeCluster(t, c, "n3")
	leader := c.WaitLeader()
	if leader.ID == "n3" {
		must(t, leader.Node().TransferLeadership(context.Background(), "n1"))
		leader = c.WaitLeader()
	}
	realID := clusterView(t, leader).ClusterID
	termBefore := leader.Node().Status().Term

	n3 := c.Nodes[2]
	n3.Kill()
	n3.DataDir = foreignDir
	n3.Restart()
	foreignID := clusterView(t, n3).ClusterID
	if realID == "" || foreignID == "" || realID == foreignID {
		t.Fatalf("cluster IDs: R %q, the foreign directory's %q; want two different ones", realID, foreignID)
	}
	testenv.WaitFor(t, "n3 to say it is not ready because R's nodes dial it", func() bool {
		reason := readiness(t, n3)
		return strings.Contains(reason, realID) && strings.Contains(reason, foreignID)
	})
	testenv.WaitFor(t, "R's leader to see n3 unreachable", func() bool {
		for _, nd := range clusterView(t, leader).Nodes {
			if nd.ID == "n3" {
				return nd.Reachable != nil && !*nd.Reachable
			}
		}
		return false
	})

	if term := leader.Node().Status().Term; term != termBefore || !leader.Node().IsLeader() {
		t.Fatalf("R's term moved from %d to %d while n3 ran on the foreign directory", termBefore, term)
	}

	// R's leader pauses: n1 and n2 of R cannot elect n3, nor can n3 take R.
	c.Isolate(leader)
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		for _, n := range c.Nodes[:2] {
			if id := n.Node().Status().LeaderID; id == "n3" {
				t.Fatalf("%s follows n3, a node of another cluster", n.ID)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Net.HealAll()
	waitLeaderAmong(t, c.Nodes[:2])

	limit := algorithms.Limit{Rate: 2, Period: time.Hour, Burst: 2}
	admitted := 0
	for i := range 6 {
		n := c.Nodes[i%2]
		ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
		d, err := n.Node().Allow(ctx, contract.Request{Checks: []contract.Check{{Key: "two-only", Limit: limit, Cost: 1}}})
		cancel()
		if err != nil {
			t.Fatalf("allow on %s: %v", n.ID, err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("%d admitted against a limit of 2", admitted)
	}
}

// oneNodeCluster makes the data directory of a one-node cluster whose node
// is called id, with a policy of its own and a few terms behind it, and
// returns it stopped.
func oneNodeCluster(t *testing.T, c *testcluster.Cluster, id string) string {
	t.Helper()
	dir := t.TempDir()
	node, err := cluster.Open(cluster.Config{ID: id, RaftAddr: "127.0.0.1:0", DataDir: dir, Bootstrap: true, NodeTLS: c.NodeTLS(id)})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	testenv.WaitFor(t, "the foreign cluster to lead and hold its ID", func() bool { return node.IsLeader() && node.Status().ClusterID != "" })
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
	defer cancel()
	must(t, node.PutPolicy(ctx, contract.Policy{Name: "foreign", Limit: algorithms.Limit{Rate: 100, Period: time.Second, Burst: 100}}))
	return dir
}

func clusterView(t *testing.T, n *testcluster.Node) wire.Cluster {
	t.Helper()
	var out wire.Cluster
	getJSON(t, n.URL()+"/v1/cluster", &out)
	return out
}

// readiness is the node's /readyz reason, "" when it is ready.
func readiness(t *testing.T, n *testcluster.Node) string {
	t.Helper()
	var out wire.Readiness
	getJSON(t, n.URL()+"/readyz", &out)
	return out.Reason
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := testcluster.HTTPClient().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// waitLeaderAmong waits until one of nodes leads and the others follow it.
func waitLeaderAmong(t *testing.T, nodes []*testcluster.Node) *testcluster.Node {
	t.Helper()
	var leader *testcluster.Node
	testenv.WaitFor(t, "a leader among "+nodes[0].ID+".."+nodes[len(nodes)-1].ID, func() bool {
		for _, n := range nodes {
			if n.Node().IsLeader() {
				leader = n
			}
		}
		if leader == nil {
			return false
		}
		for _, n := range nodes {
			if n.Node().Status().LeaderID != leader.ID {
				return false
			}
		}
		return true
	})
	return leader
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
