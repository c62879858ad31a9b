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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
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
	ctx := context.Background()
	addrFile := newAddrFile(t)
	n1 := startProcess(t, addrFile, "bash", "-c", "ulimit -n 64 && exec \"$0\" \"$@\"", buildBinary(t),
		"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(), "-addr-file", addrFile,
		"-max-http-conns", "10000", "-max-raft-conns", "1024", "-max-conns-per-client", "0")
	http1, raft1 := n1.addrs.HTTP, n1.addrs.Raft
	c1 := client.New(nil, http1)
	testenv.WaitFor(t, "n1 to lead", func() bool { st, err := c1.Cluster(ctx); return err == nil && st.Leader == "n1" })

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

	n2 := startBinary(t, "-id", "n2", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(), "-join", http1)
	c2 := client.New(nil, n2.addrs.HTTP)
	testenv.WaitFor(t, "n2 to join", func() bool { st, err := c2.Cluster(ctx); return err == nil && st.Leader != "" && len(st.Nodes) == 2 })
	// The request must go to n1's Raft port, so n1 must lead: an election
	// on a loaded machine may have given n2 the lead, which goes back.
	attempt := 0
	testenv.WaitFor(t, "a request through n2 to be decided by n1, forwarded to its Raft port", func() bool {
		if st, err := c2.Cluster(ctx); err == nil && st.Leader == "n2" {
			_, _ = c2.TransferLeadership(ctx, "n1")
		}
		attempt++
		d, err := c2.Allow(ctx, client.AllowRequest{Key: fmt.Sprint("after-the-flood-", attempt), Limit: &client.Limit{Rate: 5, Period: time.Minute}})
		return err == nil && d.Allowed && d.Leader == "n1"
	})
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
	limit := algorithms.Limit{Rate: 5, Period: time.Hour, Burst: 5}
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
			// A node of one: it may come back on other ports.
			start := func() (*process, *client.Client) {
				node := startBinary(t, "-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", dir)
				c := client.New(nil, node.addrs.HTTP)
				testenv.WaitFor(t, "the node to lead", func() bool { st, err := c.Cluster(context.Background()); return err == nil && st.Leader == "n1" })
				return node, c
			}
			stop := func(node *process) { node.stop() }
			spent := client.AllowRequest{Key: "victim", Limit: &client.Limit{Rate: 5, Period: time.Hour}}
			cost := int64(5)
			node, c := start()
			d, err := c.Allow(context.Background(), client.AllowRequest{Key: spent.Key, Limit: spent.Limit, Cost: cost})
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
					Requests: []fsm.Request{{Checks: []fsm.Check{fsm.CheckOf(contract.Check{Key: "victim", Limit: limit, Peek: true})}}}})
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
			node := startBinary(t, "-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", dir)
			c := client.New(nil, node.addrs.HTTP)
			testenv.WaitFor(t, "the node to lead", func() bool { st, err := c.Cluster(context.Background()); return err == nil && st.Leader == "n1" })
			for i := range 50 {
				_, _ = c.Allow(context.Background(), client.AllowRequest{Key: fmt.Sprint("k", i), Limit: &client.Limit{Rate: 5, Period: time.Hour}})
			}
			node.stop()
			tt.damage(t, filepath.Join(dir, "raft.db"))

			restart := exec.Command(bin, "-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", dir)
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
	dir := t.TempDir()
	// A node of one: it may come back on other ports.
	start := func() *process {
		return startBinary(t, "-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", dir)
	}
	node := start()
	c := client.New(nil, node.addrs.HTTP)
	testenv.WaitFor(t, "the node to lead", func() bool { st, err := c.Cluster(context.Background()); return err == nil && st.Leader == "n1" })
	if _, err := c.Allow(context.Background(), client.AllowRequest{Key: "the-victim-key", Limit: &client.Limit{Rate: 5, Period: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	node.stop()

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
	defer node.stop()
	testenv.WaitFor(t, "the node to say its log is damaged", func() bool {
		resp, err := http.Get("http://" + node.addrs.HTTP + "/readyz")
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
	nodes := make([]*process, 3)
	ids := []string{"n1", "n2", "n3"}
	start := func(i int, extra ...string) {
		nodes[i] = startBinary(t, append([]string{"-id", ids[i], "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir()}, extra...)...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, n := range nodes {
				t.Logf("%s's log:\n%s", ids[i], n.out.String())
			}
		}
	})
	start(0)
	n1 := nodes[0]
	data1 := n1.cmd.Args[slices.Index(n1.cmd.Args, "-data")+1]
	c := client.New(nil, n1.addrs.HTTP)
	testenv.WaitFor(t, "n1 to lead", func() bool { st, err := c.Cluster(context.Background()); return err == nil && st.Leader == "n1" })
	start(1, "-join", n1.addrs.HTTP)
	start(2, "-join", n1.addrs.HTTP)
	testenv.WaitFor(t, "three members", func() bool { st, err := c.Cluster(context.Background()); return err == nil && len(st.Nodes) == 3 })
	cost := int64(5)
	if d, err := c.Allow(context.Background(), client.AllowRequest{Key: "spent", Limit: &client.Limit{Rate: 5, Period: time.Hour}, Cost: cost}); err != nil || !d.Allowed {
		t.Fatalf("spend: %+v, %v", d, err)
	}
	for _, misuse := range []struct{ name, data, want string }{
		{"on a running node's directory", data1, "a node is running on " + data1 + ": stop it first"},
		{"on a directory without state", filepath.Join(t.TempDir(), "nowhere"), "holds no raft.db: give the stopped node's data directory"},
	} {
		var stderr bytes.Buffer
		code := dispatch(context.Background(), []string{"recover", "-data", misuse.data, "-members", "n1=" + n1.addrs.Raft}, env(nil), io.Discard, &stderr)
		if code != exitError || !strings.Contains(stderr.String(), misuse.want) {
			t.Errorf("recover %s: exit %d, %q; want exit %d saying %q", misuse.name, code, stderr.String(), exitError, misuse.want)
		}
	}
	for _, n := range nodes {
		n.kill()
	}
	var stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"recover", "-data", data1, "-members", "n1=" + n1.addrs.Raft}, env(nil), io.Discard, &stderr); code != exitOK {
		t.Fatalf("recover: exit %d: %s", code, stderr.String())
	}
	// n1 comes back where the recovered membership names it.
	nodes[0] = n1.restartOn("-id", "n1", "-data", data1)
	c = client.New(nil, nodes[0].addrs.HTTP)
	testenv.WaitFor(t, "n1 to lead alone", func() bool {
		st, err := c.Cluster(context.Background())
		return err == nil && st.Leader == "n1" && len(st.Nodes) == 1
	})
	if d, err := c.Allow(context.Background(), client.AllowRequest{Key: "spent", Limit: &client.Limit{Rate: 5, Period: time.Hour}}); err != nil || d.Allowed {
		t.Fatalf("the spent key after recovery: %+v, %v; want it still spent", d, err)
	}
}
