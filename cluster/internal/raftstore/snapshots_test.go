package raftstore

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"
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
	store := NewPacedSnapshotStore(dir, files, nil)
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
