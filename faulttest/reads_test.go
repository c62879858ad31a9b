package faulttest

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/testcluster"
)

// versionWrite is one write of the versioned policy: its version (the
// policy's rate), when it was sent, and when it was acknowledged (zero
// when it never was: it may or may not have taken effect).
type versionWrite struct {
	version        int64
	invoked, acked time.Time
}

// versionRead is one successful read of the versioned policy.
type versionRead struct {
	version        int64
	invoked, ended time.Time
	via            string
}

// TestReadsUnderFaultsNeverMissAnAcknowledgedWrite: one writer raises a
// policy's rate version by version through any node, while readers read it
// through any node, and the nemesis kills and restarts the leader or any
// node, isolates a node (the leader half the time) and cuts links. Every
// read that answers must show a version at least as new as every write
// acknowledged before the read began, and no newer than the writes sent
// before it ended: reads through the read index are linearizable, and the
// reads that cannot be are errors.
func TestReadsUnderFaultsNeverMissAnAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	const name = "versioned"
	policy := func(v int64) contract.Policy {
		return contract.Policy{Name: name, Limit: algorithms.Limit{Rate: v, Period: time.Hour, Burst: v}}
	}
	if err := c.WaitLeader().Node().PutPolicy(context.Background(), policy(1)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	writes := []versionWrite{{version: 1, acked: time.Now()}}
	var reads []versionRead
	failedReads := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for v := int64(2); ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			node := c.Nodes[rng.IntN(len(c.Nodes))].Node()
			if node == nil { // down
				time.Sleep(10 * time.Millisecond)
				continue
			}
			w := versionWrite{version: v, invoked: time.Now()}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			err := node.PutPolicy(ctx, policy(v))
			cancel()
			if err == nil {
				w.acked = time.Now()
			}
			mu.Lock()
			writes = append(writes, w)
			mu.Unlock()
			time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
		}
	})
	for reader := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(3, uint64(reader)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := c.Nodes[rng.IntN(len(c.Nodes))]
				node := n.Node()
				if node == nil { // down
					time.Sleep(10 * time.Millisecond)
					continue
				}
				invoked := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(50+rng.IntN(300))*time.Millisecond)
				p, ok, err := node.Policy(ctx, name)
				cancel()
				ended := time.Now()
				mu.Lock()
				if err != nil || !ok {
					failedReads++
				} else {
					reads = append(reads, versionRead{version: p.Limit.Rate, invoked: invoked, ended: ended, via: n.ID})
				}
				mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
			}
		})
	}

	rng := rand.New(rand.NewPCG(5, 6))
	faults := 0
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); {
		time.Sleep(time.Duration(200+rng.IntN(300)) * time.Millisecond)
		faults++
		switch rng.IntN(3) {
		case 0: // crash the leader or any node, bring it back
			n := c.Nodes[rng.IntN(len(c.Nodes))]
			if l := leaderOrNil(c); l != nil && rng.IntN(2) == 0 {
				n = l
			}
			n.Kill()
			time.Sleep(time.Duration(300+rng.IntN(800)) * time.Millisecond)
			n.Restart()
		case 1: // isolate a node, half the time the leader
			n := c.Nodes[rng.IntN(len(c.Nodes))]
			if l := leaderOrNil(c); l != nil && rng.IntN(2) == 0 {
				n = l
			}
			c.Isolate(n)
			time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
			c.Net.HealAll()
		case 2: // cut one direction of one link
			a, b := c.Nodes[rng.IntN(3)], c.Nodes[rng.IntN(3)]
			if a != b {
				c.Net.Cut(a.ID, b.ID)
				time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
				c.Net.HealAll()
			}
		}
	}
	c.Net.HealAll()
	close(stop)
	wg.Wait()

	if len(reads) < 20 {
		t.Fatalf("only %d reads answered (%d failed): the test checked too little", len(reads), failedReads)
	}
	for _, r := range reads {
		var newestAcked, newestSent int64
		for _, w := range writes {
			if !w.acked.IsZero() && w.acked.Before(r.invoked) {
				newestAcked = max(newestAcked, w.version)
			}
			if w.invoked.Before(r.ended) {
				newestSent = max(newestSent, w.version)
			}
		}
		if r.version < newestAcked {
			t.Errorf("a read on %s showed version %d, but version %d was acknowledged before the read began: a stale read", r.via, r.version, newestAcked)
		}
		if r.version > newestSent {
			t.Errorf("a read on %s showed version %d, never sent before the read ended (newest sent %d)", r.via, r.version, newestSent)
		}
	}
	t.Logf("%d reads answered and checked, %d refused, %d writes, %d fault events", len(reads), failedReads, len(writes), faults)
}
