package main

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
)

// freeAddr returns a 127.0.0.1 address with a port the OS picked.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// buildBinary builds the command into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "limitnode")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestAFullDescriptorTableDoesNotKillTheRaftPort runs a node with few file
// descriptors, fills its table with HTTP connections while peers knock on
// its Raft port, lets them go, and then needs the Raft port to serve: a
// second node joins it and a request through that node is forwarded to it.
// The Raft listener used to take "too many open files" for "closed" and
// never accept again.
func TestAFullDescriptorTableDoesNotKillTheRaftPort(t *testing.T) {
	needTools(t, "bash", "go")
	bin := buildBinary(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	http1, raft1 := freeAddr(t), freeAddr(t)
	n1 := exec.CommandContext(ctx, "bash", "-c", "ulimit -n 64 && exec \"$0\" \"$@\"", bin,
		"-id", "n1", "-http", http1, "-raft", raft1, "-data", t.TempDir())
	if err := n1.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = n1.Wait() }()
	c1 := client.New(nil, http1)
	waitFor(t, "n1 to lead", func() bool { st, err := c1.Cluster(ctx); return err == nil && st.Leader == "n1" })

	// Fill the descriptor table, knocking on the Raft port meanwhile.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 100 {
		if c, err := net.DialTimeout("tcp", http1, time.Second); err == nil {
			held = append(held, c)
		}
		if c, err := net.DialTimeout("tcp", raft1, time.Second); err == nil {
			held = append(held, c)
		}
	}
	for _, c := range held {
		c.Close()
	}
	held = nil

	http2 := freeAddr(t)
	n2 := exec.CommandContext(ctx, bin, "-id", "n2", "-http", http2, "-raft", freeAddr(t), "-data", t.TempDir(), "-join", http1)
	if err := n2.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = n2.Wait() }()
	c2 := client.New(nil, http2)
	waitFor(t, "n2 to join", func() bool { st, err := c2.Cluster(ctx); return err == nil && st.Leader == "n1" && len(st.Nodes) == 2 })
	d, err := c2.Allow(ctx, client.AllowRequest{Key: "after-the-flood", Limit: &client.Limit{Rate: 5, Period: "1m"}})
	if err != nil || !d.Allowed || d.Leader != "n1" {
		t.Fatalf("a request forwarded to n1's Raft port: %+v, %v", d, err)
	}
}
