package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
)

// TestANodeOnAnotherClustersDirectoryGivenJoinExits: a node with the data
// directory of a one-node cluster F, started with -join pointing at
// another cluster R, exits at start naming both clusters' IDs instead of
// serving F's state among R's nodes.
func TestANodeOnAnotherClustersDirectoryGivenJoinExits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r1 := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir()}, nil)
	realID := clusterIDOf(t, ctx, r1.addr)

	foreignDir := t.TempDir()
	fctx, stopForeign := context.WithCancel(ctx)
	f := startNode(t, fctx, []string{"-id", "n3", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", foreignDir}, nil)
	foreignID := clusterIDOf(t, ctx, f.addr)
	stopForeign()
	if err := <-f.done; err != nil {
		t.Fatal(err)
	}
	if foreignID == realID {
		t.Fatalf("two clusters share the ID %s", realID)
	}

	err := run(ctx, []string{"-id", "n3", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", foreignDir, "-join", r1.addr}, env(nil), io.Discard, nil)
	t.Logf("%v", err)
	if err == nil || !strings.Contains(err.Error(), realID) || !strings.Contains(err.Error(), foreignID) {
		t.Fatalf("a node on cluster %s's directory started with -join to cluster %s: %v", foreignID, realID, err)
	}
}

// clusterIDOf waits until the node at addr names its cluster's ID.
func clusterIDOf(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st, err := client.New(nil, addr).Cluster(ctx); err == nil && st.ClusterID != "" {
			return st.ClusterID
		}
	}
	t.Fatalf("%s named no cluster ID", addr)
	return ""
}
