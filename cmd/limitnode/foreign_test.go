package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
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
	id := ""
	testenv.WaitFor(t, addr+" to name its cluster's ID", func() bool {
		st, err := client.New(nil, addr).Cluster(ctx)
		id = st.ClusterID
		return err == nil && id != ""
	})
	return id
}
