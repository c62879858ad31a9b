package cluster

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/algorithms"
)

// TestPacedSnapshotsSyncAsTheyGrow writes a snapshot of 2.5 sync steps
// through the paced store: it must find the file Raft's store writes (the
// layout it relies on), sync it twice on the way, and leave a snapshot that
// reads back whole.
func TestPacedSnapshotsSyncAsTheyGrow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	store := newPacedSnapshotStore(dir, files, newNodeMetrics())
	sink, err := store.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("limitnode"), snapshotSyncEvery*5/2/9)
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 64<<10)
		if _, err := sink.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	paced := sink.(*pacedSink)
	if paced.file == nil {
		t.Fatalf("the paced sink did not find the snapshot's file at %q", paced.path)
	}
	if want := int64(2 * snapshotSyncEvery); paced.synced < want || paced.synced > int64(len(data)) {
		t.Fatalf("synced up to %d of %d bytes, want at least %d", paced.synced, len(data), want)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	metas, err := store.List()
	if err != nil || len(metas) != 1 {
		t.Fatalf("List: %v, %v", metas, err)
	}
	_, rc, err := store.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(data))
	}
}

// TestSnapshotDirHoldsTheSnapshots opens a node with SnapshotDir apart from
// DataDir: its snapshots go there, and a restart finds them and the state.
func TestSnapshotDirHoldsTheSnapshots(t *testing.T) {
	t.Parallel()
	dataDir, snapDir := t.TempDir(), t.TempDir()
	cfg := Config{ID: "n1", RaftAddr: "127.0.0.1:0", DataDir: dataDir, SnapshotDir: snapDir, Bootstrap: true}
	limit := algorithms.Limit{Rate: 2, PeriodNanos: int64(time.Hour), Burst: 2}
	allow := func(n *Node) bool {
		t.Helper()
		d, err := n.Allow(t.Context(), contract.Request{Checks: []contract.Check{{Key: "k", Limit: limit, Cost: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	node, err := Open(cfg)
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
	node, err = Open(cfg)
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
