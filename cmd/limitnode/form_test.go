package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
)

// expectedNodes is a set of nodes started with -bootstrap-expect: the flags
// of each differ only in -id, -http, -raft and -data. Each -join names
// every node's HTTP address before any starts, so the test holds their
// ports (and their Raft ports, which a restarted node comes back on).
type expectedNodes struct {
	ids, https, rafts, dirs []string
}

func newExpectedNodes(t *testing.T, count int) expectedNodes {
	var e expectedNodes
	for i := range count {
		e.ids = append(e.ids, fmt.Sprintf("n%d", i+1))
		e.https = append(e.https, holdAddr(t))
		e.rafts = append(e.rafts, holdAddr(t))
		e.dirs = append(e.dirs, t.TempDir())
	}
	return e
}

func (e expectedNodes) args(i int) []string {
	return []string{"-id", e.ids[i], "-http", e.https[i], "-raft", e.rafts[i], "-data", e.dirs[i],
		"-bootstrap-expect", fmt.Sprint(len(e.ids)), "-join", strings.Join(e.https, ",")}
}

// oneCluster reports whether every address answers with the same leader and
// the same members, all of e at their Raft addresses, each member with its
// HTTP address recorded.
func (e expectedNodes) oneCluster(ctx context.Context, addrs ...string) bool {
	return sameCluster(ctx, len(e.ids), func(st client.ClusterStatus) bool {
		for i, n := range st.Nodes {
			if n.ID != e.ids[i] || n.RaftAddr != e.rafts[i] {
				return false
			}
		}
		return true
	}, addrs...)
}

// TestBootstrapExpectFormsOneCluster starts three nodes at once with the
// same -bootstrap-expect and -join, twenty times: each time one cluster of
// all three forms, formed by exactly one node, the one with the lowest ID.
func TestBootstrapExpectFormsOneCluster(t *testing.T) {
	t.Parallel()
	const rounds, inParallel = 20, 4
	for lane := range inParallel {
		t.Run(fmt.Sprintf("lane%d", lane), func(t *testing.T) {
			t.Parallel()
			for round := lane; round < rounds; round += inParallel {
				formOnce(t, round)
			}
		})
	}
}

func formOnce(t *testing.T, round int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newExpectedNodes(t, 3)
	// A node serves (and says it is ready to) before its cluster forms, so
	// these start within milliseconds of each other.
	nodes := make([]running, 3)
	logs := make([]*testenv.SyncBuffer, 3)
	for i := range 3 {
		nodes[i], logs[i] = startLogged(t, ctx, e.args(i))
	}
	testenv.WaitFor(t, fmt.Sprintf("round %d: one cluster of three", round), func() bool {
		return e.oneCluster(ctx, nodes[0].addr, nodes[1].addr, nodes[2].addr)
	})
	for i, l := range logs {
		formed := strings.Count(l.String(), "formed a new cluster")
		if want := map[bool]int{true: 1, false: 0}[i == 0]; formed != want {
			t.Fatalf("round %d: node %s logged forming a cluster %d times, want %d:\n%s", round, e.ids[i], formed, want, l)
		}
	}
	cancel()
	for _, n := range nodes {
		if err := <-n.done; err != nil {
			t.Fatalf("round %d: node stopped with %v", round, err)
		}
	}
}

// TestBootstrapExpectWaitsForTheLastNode: with two of three nodes started,
// they find each other and no cluster forms; the third makes one; a node
// restarted with the same flags goes back to its cluster; a node rebuilt
// with no state on another Raft port joins in its own place.
func TestBootstrapExpectWaitsForTheLastNode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newExpectedNodes(t, 3)
	// The two that start first are the ones with the highest IDs: the one
	// that will form the cluster is missing.
	n2, logs2 := startLogged(t, ctx, e.args(1))
	ctx3, stop3 := context.WithCancel(ctx)
	n3, logs3 := startLogged(t, ctx3, e.args(2))
	testenv.WaitFor(t, "the two nodes to find each other", func() bool {
		return strings.Contains(logs2.String(), "nodes=n2,n3") && strings.Contains(logs3.String(), "nodes=n2,n3")
	})
	for _, n := range []running{n2, n3} {
		st, err := client.New(nil, n.addr).Cluster(ctx)
		if err != nil || st.Leader != "" || len(st.Nodes) != 0 {
			t.Fatalf("with two of three nodes up: %+v, %v", st, err)
		}
		if code := getStatus(t, "http://"+n.addr+"/readyz"); code != http.StatusServiceUnavailable {
			t.Fatalf("readyz of a node waiting for its cluster: %d", code)
		}
	}

	ctx1, stop1 := context.WithCancel(ctx)
	n1 := startNode(t, ctx1, e.args(0), nil)
	testenv.WaitFor(t, "one cluster of three", func() bool { return e.oneCluster(ctx, n1.addr, n2.addr, n3.addr) })

	stop1()
	if err := <-n1.done; err != nil {
		t.Fatalf("n1 stopped with %v", err)
	}
	n1, logs1 := startLogged(t, ctx, e.args(0))
	testenv.WaitFor(t, "the restarted node back in its cluster", func() bool {
		return e.oneCluster(ctx, n1.addr, n2.addr, n3.addr) && getStatus(t, "http://"+n1.addr+"/readyz") == http.StatusOK
	})
	if l := logs1.String(); !strings.Contains(l, "ignored: this node restarts into the cluster it belonged to") || strings.Contains(l, "formed a new cluster") {
		t.Fatalf("restarted node's log:\n%s", l)
	}

	stop3()
	if err := <-n3.done; err != nil {
		t.Fatalf("n3 stopped with %v", err)
	}
	e.rafts[2], e.dirs[2] = holdAddr(t), t.TempDir()
	n3 = startNode(t, ctx, e.args(2), nil)
	testenv.WaitFor(t, "the rebuilt node in its own place", func() bool { return e.oneCluster(ctx, n1.addr, n2.addr, n3.addr) })
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
