package cluster_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
)

// TestSnapshotDirHoldsTheSnapshots opens a node with SnapshotDir apart from
// DataDir: its snapshots go there, and a restart finds them and the state.
func TestSnapshotDirHoldsTheSnapshots(t *testing.T) {
	t.Parallel()
	dataDir, snapDir := t.TempDir(), t.TempDir()
	cfg := cluster.Config{ID: "n1", RaftAddr: "127.0.0.1:0", DataDir: dataDir, SnapshotDir: snapDir, Bootstrap: true}
	limit := algorithms.Limit{Rate: 2, Period: time.Hour, Burst: 2}
	allow := func(n *cluster.Node) bool {
		t.Helper()
		d, err := n.Allow(t.Context(), contract.Request{Checks: []contract.Check{{Key: "k", Limit: limit, Cost: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	node, err := cluster.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if !allow(node) {
			t.Fatalf("request %d of a limit of 2 was denied", i+1)
		}
	}
	if err := node.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := node.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(filepath.Join(snapDir, "snapshots")); err != nil || len(entries) == 0 {
		t.Fatalf("SnapshotDir holds %v (%v), want a snapshot", entries, err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "snapshots")); !os.IsNotExist(err) {
		t.Fatalf("DataDir has a snapshots directory (%v)", err)
	}
	node, err = cluster.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if !node.HadState() {
		t.Fatal("the restarted node found no state")
	}
	if allow(node) {
		t.Fatal("a third request was allowed after the restart: the spent tokens were lost")
	}
}
