package main

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
	"go.etcd.io/bbolt"
)

// memberIDs is the cluster's member IDs as the node at addr sees them, sorted.
func memberIDs(t *testing.T, ctx context.Context, addr string) []string {
	t.Helper()
	st, err := client.New(nil, addr).Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range st.Nodes {
		ids = append(ids, n.ID+"@"+n.RaftAddr)
	}
	slices.Sort(ids)
	return ids
}

// TestANodeStartedWithARunningMembersIDIsRefused: a node started with -join
// and the -id of a member that runs elsewhere exits naming that member, and
// the member stays; with -replace it takes the member's place.
func TestANodeStartedWithARunningMembersIDIsRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n1 := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir()}, nil)
	n2 := startNode(t, ctx, []string{"-id", "n2", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(), "-join", n1.addr}, nil)
	testenv.WaitFor(t, "n2 to be a member", func() bool { return len(memberIDs(t, ctx, n1.addr)) == 2 })
	before := memberIDs(t, ctx, n1.addr)

	args := []string{"-id", "n2", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(), "-join", n1.addr, "-join-timeout", "20s"}
	// A node that joined would serve until its context ends, then return nil.
	refusedCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	err := run(refusedCtx, args, env(nil), io.Discard, nil)
	stop()
	if err == nil || !strings.Contains(err.Error(), `member "n2" is running at`) || !strings.Contains(err.Error(), "-replace") {
		t.Fatalf("a second n2: %v, want a refusal naming the running n2 and -replace", err)
	}
	if after := memberIDs(t, ctx, n1.addr); !slices.Equal(after, before) {
		t.Fatalf("the refused node changed the members from %v to %v", before, after)
	}
	if st, err := client.New(nil, n2.addr).Ready(ctx); err != nil || !st.Ready {
		t.Fatalf("the running n2 is no longer ready: %+v %v", st, err)
	}

	replacement := startNode(t, ctx, append(args, "-replace"), nil)
	testenv.WaitFor(t, "the replacement to be ready", func() bool {
		st, err := client.New(nil, replacement.addr).Ready(ctx)
		return err == nil && st.Ready
	})
	if after := memberIDs(t, ctx, n1.addr); len(after) != 2 || slices.Contains(after, before[1]) {
		t.Fatalf("after -replace the members are %v; the old n2 (%s) should be gone", after, before[1])
	}
}

// TestADataDirectoryKeepsItsNodeID: a node restarted on its data directory
// under another -id exits naming the ID the directory belongs to, whether
// the directory records it or (written before it did) only its membership
// does.
func TestADataDirectoryKeepsItsNodeID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		forget bool // remove the recorded ID, as in a directory from before it was recorded
	}{
		{"the directory records its node", false},
		{"only the membership names the node", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			raftAddr := holdAddr(t) // n5 must come where n1 was
			ctx, cancel := context.WithCancel(context.Background())
			n := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", raftAddr, "-data", dir}, nil)
			testenv.WaitFor(t, "n1 to lead", func() bool {
				st, err := client.New(nil, n.addr).Ready(ctx)
				return err == nil && st.Ready
			})
			cancel()
			if err := <-n.done; err != nil {
				t.Fatal(err)
			}
			if tt.forget {
				forgetNodeID(t, filepath.Join(dir, "raft.db"))
			}
			ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, []string{"-id", "n5", "-http", "127.0.0.1:0", "-raft", raftAddr, "-data", dir}, env(nil), io.Discard, nil)
			if err == nil || !strings.Contains(err.Error(), `belongs to node "n1", not "n5"`) {
				t.Fatalf("n5 on n1's directory: %v, want a refusal naming n1", err)
			}
		})
	}
}

// forgetNodeID removes the node ID that a stopped node's raft.db records.
func forgetNodeID(t *testing.T, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	found := false
	err = db.Update(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bbolt.Bucket) error {
			if b.Get([]byte("limitnode.node_id")) == nil {
				return nil
			}
			found = true
			return b.Delete([]byte("limitnode.node_id"))
		})
	})
	if err != nil || !found {
		t.Fatalf("forget the node ID of %s: found %v, %v", path, found, err)
	}
}
