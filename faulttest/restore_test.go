package faulttest

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/internal/testhooks"
	"github.com/limitnode/limitnode/testcluster"
)

// TestALeaderKilledDuringARestoreLeavesOneState is the
// leader-killed-during-restore case: a backup of tens of thousands of keys
// is restored into a three-node cluster whose leader is killed (as kill -9
// would) part way, at several moments, over links slowed so that the
// restore takes a while. Whatever the moment, once the node is back every
// node holds one state (the backup's or the one before, never some of
// each), and every node says it is ready.
func TestALeaderKilledDuringARestoreLeavesOneState(t *testing.T) {
	t.Parallel()
	file := bigBackup(t, 60_000)
	after := func(d time.Duration) func(*testcluster.Node, <-chan struct{}) {
		return func(*testcluster.Node, <-chan struct{}) { time.Sleep(d) }
	}
	moments := []struct {
		name string
		// when returns once the leader should be killed.
		when func(leader *testcluster.Node, restoring <-chan struct{})
	}{
		{"100ms in", after(100 * time.Millisecond)},
		{"400ms in", after(400 * time.Millisecond)},
		{"1s in", after(time.Second)},
		{"once the leader holds the backup's state", func(leader *testcluster.Node, restoring <-chan struct{}) {
			for !bytes.Equal(limitsDigestOf(leader), file.digest[:]) {
				select {
				case <-restoring:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}},
	}
	for _, m := range moments {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			c := testcluster.Start(t, 3)
			leader := c.WaitLeader()
			spend(t, leader, "spent-before", algorithms.Limit{Rate: 3, Period: time.Hour, Burst: 3}, 3)
			c.WaitConverged()
			for _, o := range c.Nodes {
				if o != leader {
					c.Net.Delay(leader.ID, o.ID, 20*time.Millisecond)
				}
			}
			restoring := make(chan struct{})
			go func() {
				defer close(restoring)
				cl := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, leader.URL())
				_, err := cl.Restore(context.Background(), bytes.NewReader(file.data), int64(len(file.data)))
				t.Logf("the restore of %d bytes answered %v", len(file.data), err)
			}()
			m.when(leader, restoring)
			select {
			case <-restoring:
				t.Logf("the restore ended before the kill")
			default:
			}
			t.Logf("killing %s holding the backup's state: %v", leader.ID, bytes.Equal(limitsDigestOf(leader), file.digest[:]))
			leader.Kill()
			<-restoring
			c.Net.HealAll()
			leader.Restart()
			c.WaitConverged()
			for _, n := range c.Nodes {
				t.Logf("%s holds the backup's state: %v; ready: %q", n.ID, bytes.Equal(limitsDigestOf(n), file.digest[:]), readiness(t, n))
			}
			testenv.WaitFor(t, "every node to hold one state and say it is ready", func() bool {
				var first []byte
				for _, n := range c.Nodes {
					d := limitsDigestOf(n)
					if first == nil {
						first = d
					}
					if !bytes.Equal(d, first) || readiness(t, n) != "" {
						return false
					}
				}
				return true
			})
		})
	}
}

// backupFile is a backup file and the limits digest it holds.
type backupFile struct {
	data   []byte
	digest [32]byte
}

// bigBackup fills a one-node cluster with keys and returns its backup.
func bigBackup(t *testing.T, keys int) backupFile {
	t.Helper()
	src := testcluster.Start(t, 1)
	node := src.Nodes[0].Node()
	limit := algorithms.Limit{Rate: 10, Period: time.Hour, Burst: 10}
	for start := 0; start < keys; start += contract.MaxBatchSize {
		reqs := make([]contract.Request, 0, contract.MaxBatchSize)
		for i := start; i < min(start+contract.MaxBatchSize, keys); i++ {
			reqs = append(reqs, contract.Request{Checks: []contract.Check{{Key: fmt.Sprintf("restored-key-%07d", i), Limit: limit, Cost: 1}}})
		}
		if _, err := node.AllowBatch(context.Background(), reqs); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	cl := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, src.Nodes[0].URL())
	info, err := cl.Backup(context.Background(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	src.StopAll()
	out := backupFile{data: buf.Bytes()}
	if _, err := hex.Decode(out.digest[:], []byte(info.LimitsDigest)); err != nil {
		t.Fatal(err)
	}
	return out
}

// limitsDigestOf is the node's limits digest, or nil while it is down.
func limitsDigestOf(n *testcluster.Node) []byte {
	node := n.Node()
	if node == nil {
		return nil
	}
	_, d := testhooks.NodeLimitsDigest(node)
	return d[:]
}
