package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/fsm"
	"github.com/limitnode/limitnode/internal/testenv"
)

// TestAFullDescriptorTableDoesNotKillTheRaftPort runs a node with few file
// descriptors, fills its table with HTTP connections while peers knock on
// its Raft port, lets them go, and then needs the Raft port to serve: a
// second node joins it and a request through that node is forwarded to it.
// The caps are given, so that they stay above what the table holds (caps
// left at their defaults would be lowered to fit it). The Raft listener used
// to take "too many open files" for "closed" and never accept again.
func TestAFullDescriptorTableDoesNotKillTheRaftPort(t *testing.T) {
	testenv.NeedPrograms(t, "bash", "go")
	bin := buildBinary(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	http1, raft1 := testenv.FreeAddr(t), testenv.FreeAddr(t)
	n1 := exec.CommandContext(ctx, "bash", "-c", "ulimit -n 64 && exec \"$0\" \"$@\"", bin,
		"-id", "n1", "-http", http1, "-raft", raft1, "-data", t.TempDir(),
		"-max-http-conns", "10000", "-max-raft-conns", "1024", "-max-conns-per-client", "0")
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

	http2 := testenv.FreeAddr(t)
	n2 := exec.CommandContext(ctx, bin, "-id", "n2", "-http", http2, "-raft", testenv.FreeAddr(t), "-data", t.TempDir(), "-join", http1)
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

// TestAForgedEntryOnDiskCannotStopTheCluster writes, into a stopped node's
// raft.db, entries stamped far in the future (as a forged AppendEntries or a
// bad disk would leave them), then restarts the node: it must refuse them,
// keep a spent key spent, and decide as before. One entry at the latest
// time the log may carry used to move cluster time to 2160, after which
// every entry the leader stamped was out of range and every /v1/allow
// answered 500; fourteen of just under ten years each, in one term, used to
// pass one by one (each within the step one entry could take) and get
// there as well.
func TestAForgedEntryOnDiskCannotStopTheCluster(t *testing.T) {
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	limit := algorithms.Limit{Rate: 5, PeriodNanos: int64(time.Hour), Burst: 5}
	tests := []struct {
		name string
		// stamps are the times of the forged entries, given the latest
		// time the node applied.
		stamps func(last int64) []int64
	}{
		{"one entry at the latest time", func(int64) []int64 { return []int64{fsm.MaxNowNanos} }},
		{"fourteen entries of just under ten years", func(last int64) []int64 {
			var out []int64
			for i := range 14 {
				out = append(out, min(last+int64(i+1)*(int64(fsm.MaxTimeStep)-int64(time.Hour)), fsm.MaxNowNanos))
			}
			return out
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			httpAddr, raftAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
			start := func() (*exec.Cmd, *client.Client) {
				cmd := exec.Command(bin, "-id", "n1", "-http", httpAddr, "-raft", raftAddr, "-data", dir)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				c := client.New(nil, httpAddr)
				waitFor(t, "the node to lead", func() bool { st, err := c.Cluster(context.Background()); return err == nil && st.Leader == "n1" })
				return cmd, c
			}
			stop := func(cmd *exec.Cmd) {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}
			spent := client.AllowRequest{Key: "victim", Limit: &client.Limit{Rate: 5, Period: "1h"}}
			cost := int64(5)
			node, c := start()
			d, err := c.Allow(context.Background(), client.AllowRequest{Key: spent.Key, Limit: spent.Limit, Cost: &cost})
			if err != nil || !d.Allowed {
				t.Fatalf("spend the key: %+v, %v", d, err)
			}
			stop(node)

			store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
			if err != nil {
				t.Fatal(err)
			}
			last, err := store.LastIndex()
			if err != nil {
				t.Fatal(err)
			}
			var tail raft.Log
			if err := store.GetLog(last, &tail); err != nil {
				t.Fatal(err)
			}
			for i, stamp := range tt.stamps(time.Now().UnixNano()) {
				forged, err := fsm.Encode(fsm.CommandAllow, &fsm.AllowCommand{NowNanos: stamp,
					Requests: []fsm.Request{{Checks: []fsm.Check{fsm.CheckOf(contract.Check{Key: "victim", Limit: limit})}}}})
				if err != nil {
					t.Fatal(err)
				}
				if err := store.StoreLog(&raft.Log{Index: last + 1 + uint64(i), Term: tail.Term, Type: raft.LogCommand, Data: forged}); err != nil {
					t.Fatal(err)
				}
			}
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}

			node, c = start()
			defer stop(node)
			d, err = c.Allow(context.Background(), spent)
			if err != nil || d.Allowed {
				t.Fatalf("the spent key after the forged entries: %+v, %v; want a 429", d, err)
			}
			d, err = c.Allow(context.Background(), client.AllowRequest{Key: "fresh", Limit: spent.Limit})
			if err != nil || !d.Allowed {
				t.Fatalf("a fresh key after the forged entries: %+v, %v; want it allowed", d, err)
			}
		})
	}
}

// TestADamagedLogStopsTheNodeWithOneLine: a truncated raft.db used to crash
// the node with a segmentation fault, and a zeroed page with a panic inside
// bbolt. Either now stops it at start with one line naming the file.
func TestADamagedLogStopsTheNodeWithOneLine(t *testing.T) {
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	damages := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"truncated to half", func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"a page zeroed", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fi, _ := f.Stat()
			page := int64(os.Getpagesize())
			for off := 2 * page; off < fi.Size(); off += page {
				if _, err := f.WriteAt(make([]byte, page), off); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range damages {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			httpAddr := testenv.FreeAddr(t)
			node := exec.Command(bin, "-id", "n1", "-http", httpAddr, "-raft", testenv.FreeAddr(t), "-data", dir)
			if err := node.Start(); err != nil {
				t.Fatal(err)
			}
			c := client.New(nil, httpAddr)
			waitFor(t, "the node to lead", func() bool { st, err := c.Cluster(context.Background()); return err == nil && st.Leader == "n1" })
			for i := range 50 {
				_, _ = c.Allow(context.Background(), client.AllowRequest{Key: fmt.Sprint("k", i), Limit: &client.Limit{Rate: 5, Period: "1h"}})
			}
			_ = node.Process.Signal(syscall.SIGTERM)
			_ = node.Wait()
			tt.damage(t, filepath.Join(dir, "raft.db"))

			restart := exec.Command(bin, "-id", "n1", "-http", testenv.FreeAddr(t), "-raft", testenv.FreeAddr(t), "-data", dir)
			out, err := restart.CombinedOutput()
			var exit *exec.ExitError
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			last := lines[len(lines)-1]
			if !errors.As(err, &exit) || exit.ExitCode() != exitError || !strings.Contains(last, "raft.db is damaged") || strings.Contains(string(out), "goroutine ") {
				t.Fatalf("restart on a damaged log: %v\n%s", err, out)
			}
		})
	}
}

// TestAChangedByteInTheLogIsDetected: a byte changed in an entry of a
// stopped node's raft.db used to be replayed as it was, so the node's state
// silently differed from the others'. Entries carry a checksum now: the
// restarted node refuses the entry and says, in /readyz, that its log holds
// a damaged entry.
func TestAChangedByteInTheLogIsDetected(t *testing.T) {
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	dir := t.TempDir()
	httpAddr := testenv.FreeAddr(t)
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "-id", "n1", "-http", httpAddr, "-raft", testenv.FreeAddr(t), "-data", dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	c := client.New(nil, httpAddr)
	node := start()
	waitFor(t, "the node to lead", func() bool { st, err := c.Cluster(context.Background()); return err == nil && st.Leader == "n1" })
	if _, err := c.Allow(context.Background(), client.AllowRequest{Key: "the-victim-key", Limit: &client.Limit{Rate: 5, Period: "1h"}}); err != nil {
		t.Fatal(err)
	}
	_ = node.Process.Signal(syscall.SIGTERM)
	_ = node.Wait()

	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	changed := false
	for i := first; i <= last && !changed; i++ {
		var entry raft.Log
		if err := store.GetLog(i, &entry); err != nil {
			t.Fatal(err)
		}
		if at := bytes.Index(entry.Data, []byte("the-victim-key")); entry.Type == raft.LogCommand && at >= 0 {
			entry.Data[at] ^= 0x20 // "The-victim-key": another key
			if err := store.StoreLog(&entry); err != nil {
				t.Fatal(err)
			}
			changed = true
		}
	}
	store.Close()
	if !changed {
		t.Fatal("no entry holds the key")
	}
	node = start()
	defer func() { _ = node.Process.Signal(syscall.SIGTERM); _ = node.Wait() }()
	waitFor(t, "the node to say its log is damaged", func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 503 && strings.Contains(string(body), "damaged entry")
	})
}

// TestRecoverFromALostQuorum: three nodes, a spent key, then two of them
// gone for good. The survivor alone cannot elect a leader; after limitnode
// recover names it the only member, it leads again with the key still spent.
func TestRecoverFromALostQuorum(t *testing.T) {
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	type node struct {
		id, http, raft, data string
		cmd                  *exec.Cmd
		logs                 syncBuffer
	}
	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = &node{id: fmt.Sprint("n", i+1), http: testenv.FreeAddr(t), raft: testenv.FreeAddr(t), data: t.TempDir()}
	}
	start := func(n *node, extra ...string) {
		n.cmd = exec.Command(bin, append([]string{"-id", n.id, "-http", n.http, "-raft", n.raft, "-data", n.data}, extra...)...)
		n.cmd.Stderr = &n.logs
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("%s's log:\n%s", n.id, n.logs.String())
			}
		}
	})
	kill := func(n *node) { _ = n.cmd.Process.Kill(); _ = n.cmd.Wait() }
	start(nodes[0])
	c := client.New(nil, nodes[0].http)
	waitFor(t, "n1 to lead", func() bool { st, err := c.Cluster(context.Background()); return err == nil && st.Leader == "n1" })
	start(nodes[1], "-join", nodes[0].http)
	start(nodes[2], "-join", nodes[0].http)
	waitFor(t, "three members", func() bool { st, err := c.Cluster(context.Background()); return err == nil && len(st.Nodes) == 3 })
	cost := int64(5)
	if d, err := c.Allow(context.Background(), client.AllowRequest{Key: "spent", Limit: &client.Limit{Rate: 5, Period: "1h"}, Cost: &cost}); err != nil || !d.Allowed {
		t.Fatalf("spend: %+v, %v", d, err)
	}
	for _, misuse := range []struct{ name, data, want string }{
		{"on a running node's directory", nodes[0].data, "a node is running on " + nodes[0].data + ": stop it first"},
		{"on a directory without state", filepath.Join(t.TempDir(), "nowhere"), "holds no raft.db: give the stopped node's data directory"},
	} {
		var stderr bytes.Buffer
		code := dispatch(context.Background(), []string{"recover", "-data", misuse.data, "-members", "n1=" + nodes[0].raft}, env(nil), io.Discard, &stderr)
		if code != exitError || !strings.Contains(stderr.String(), misuse.want) {
			t.Errorf("recover %s: exit %d, %q; want exit %d saying %q", misuse.name, code, stderr.String(), exitError, misuse.want)
		}
	}
	for _, n := range nodes {
		kill(n)
	}
	var stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"recover", "-data", nodes[0].data, "-members", "n1=" + nodes[0].raft}, env(nil), io.Discard, &stderr); code != exitOK {
		t.Fatalf("recover: exit %d: %s", code, stderr.String())
	}
	start(nodes[0])
	defer kill(nodes[0])
	waitFor(t, "n1 to lead alone", func() bool {
		st, err := c.Cluster(context.Background())
		return err == nil && st.Leader == "n1" && len(st.Nodes) == 1
	})
	if d, err := c.Allow(context.Background(), client.AllowRequest{Key: "spent", Limit: &client.Limit{Rate: 5, Period: "1h"}}); err != nil || d.Allowed {
		t.Fatalf("the spent key after recovery: %+v, %v; want it still spent", d, err)
	}
}
