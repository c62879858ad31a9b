package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/limitnode/limitnode/internal/testenv"
)

// TestIdleConnectionsCannotLockAClientOut starts a node without tokens with
// room for 12 HTTP connections, 4 per client address, and fills it from
// three loopback addresses with keep-alive connections that each made a
// call and went idle, as 9,600 idle connections from 40 addresses filled a
// node's port for its two minutes of idle time. A client from a fourth
// address is served all the same (the node closes an idle connection of an
// address holding the most to make room), and the connections that are
// left still are.
func TestIdleConnectionsCannotLockAClientOut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(),
		"-max-http-conns", "12", "-max-conns-per-client", "4"}, nil)
	testenv.WaitFor(t, "the node to be ready", func() bool { return readyAt(node.addr) })

	var idle []*keptAlive
	for a := 2; a <= 4; a++ {
		for range 4 {
			k := keepAlive(t, fmt.Sprintf("127.0.0.%d", a), node.addr)
			if status, err := k.get("/v1/cluster", ""); err != nil || status != http.StatusOK {
				t.Fatalf("a connection from 127.0.0.%d: %d, %v", a, status, err)
			}
			idle = append(idle, k)
		}
	}
	served := func() bool {
		status, err := keepAlive(t, "127.0.0.5", node.addr).get("/v1/cluster", "")
		return err == nil && status == http.StatusOK
	}
	deadline := time.Now().Add(20 * time.Second)
	for !served() {
		if time.Now().After(deadline) {
			t.Fatal("a client from 127.0.0.5 was refused for 20 s while 12 connections sat idle")
		}
		time.Sleep(100 * time.Millisecond)
	}
	still := 0
	for _, k := range idle {
		if status, err := k.get("/v1/cluster", ""); err == nil && status == http.StatusOK {
			still++
		}
	}
	if still != len(idle)-1 {
		t.Fatalf("%d of the %d idle connections are still served, want all but the one closed to make room", still, len(idle))
	}
}
