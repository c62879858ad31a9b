package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// TestReadsSeeTheLatestWriteWithoutALogEntry: a policy written through
// one node is read at once on every node, and the reads append nothing to
// the log (a read index, not a barrier entry).
func TestReadsSeeTheLatestWriteWithoutALogEntry(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	ctx := context.Background()
	for version := int64(1); version <= 5; version++ {
		writer := c.Nodes[int(version)%len(c.Nodes)]
		p := contract.Policy{Name: "versioned", Limit: algorithms.Limit{Rate: version, Period: time.Hour, Burst: version}}
		if err := writer.Node().PutPolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes {
			got, ok, err := n.Node().Policy(ctx, "versioned")
			if err != nil || !ok || got.Limit.Rate != version {
				t.Fatalf("version %d written on %s, read on %s: %+v %v %v", version, writer.ID, n.ID, got.Limit, ok, err)
			}
		}
	}
	before := leader.Node().Status().CommitIndex
	for range 20 {
		for _, n := range c.Nodes {
			if _, _, err := n.Node().Policies(ctx, "", 10, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if after := leader.Node().Status().CommitIndex; after != before {
		t.Fatalf("60 reads moved the commit index from %d to %d: reads appended entries", before, after)
	}
}

// TestADeposedLeaderRefusesReads: a leader cut off from the others keeps
// believing it leads for a while, and the majority elects another that
// changes a policy. Every read on the cut-off leader (or on a node that can
// only reach it) is an error, never the state from before the change.
func TestADeposedLeaderRefusesReads(t *testing.T) {
	t.Parallel()
	// n1, the first leader, keeps believing it leads for 5 s without a
	// quorum; the others elect a new leader after 500 ms.
	c := testcluster.Start(t, 3, testcluster.Options{Configure: func(cfg *cluster.Config) {
		if cfg.ID == "n1" {
			cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 5*time.Second, 5*time.Second, 5*time.Second
		}
	}})
	old := c.WaitLeader()
	if old.ID != "n1" {
		t.Fatalf("the first leader is %s, not n1", old.ID)
	}
	ctx := context.Background()
	p := contract.Policy{Name: "plan", Limit: algorithms.Limit{Rate: 100, Period: time.Hour, Burst: 100}}
	if err := old.Node().PutPolicy(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, _, err := old.Node().Policy(ctx, "plan"); err != nil || got.Limit.Rate != 100 {
		t.Fatalf("a read on the leader before the cut: %+v %v", got.Limit, err)
	}
	c.Isolate(old)
	var next *testcluster.Node
	testenv.WaitFor(t, "a leader on the majority side", func() bool {
		for _, n := range c.Nodes {
			if n != old && n.Node().IsLeader() {
				next = n
				return true
			}
		}
		return false
	})
	// A lower limit: a raise would wait out the deny leases first, and the
	// old leader's belief that it leads lasts only 5 s.
	p.Limit.Rate, p.Limit.Burst = 1, 1
	if err := next.Node().PutPolicy(ctx, p); err != nil {
		t.Fatal(err)
	}
	if !old.Node().IsLeader() {
		t.Fatal("the old leader stepped down before it was asked: the test proves nothing")
	}
	reads := []struct {
		name string
		read func(ctx context.Context, n *cluster.Node) error
	}{
		{"a policy", func(ctx context.Context, n *cluster.Node) error {
			got, _, err := n.Policy(ctx, "plan")
			if err == nil && got.Limit.Rate != 1 {
				t.Errorf("the policy read %d/h, from before the change to 1/h", got.Limit.Rate)
			}
			return err
		}},
		{"the policies", func(ctx context.Context, n *cluster.Node) error { _, _, err := n.Policies(ctx, "", 10, 1); return err }},
		{"a key", func(ctx context.Context, n *cluster.Node) error { _, _, err := n.Key(ctx, "tenant"); return err }},
		{"the keys", func(ctx context.Context, n *cluster.Node) error { _, _, err := n.Keys(ctx, "", "", 10); return err }},
		{"the blocks", func(ctx context.Context, n *cluster.Node) error { _, _, _, err := n.Blocks(ctx, "", 10); return err }},
		{"the audit trail", func(ctx context.Context, n *cluster.Node) error { _, err := n.Audit(ctx, 0, 10); return err }},
		{"the RLS domains", func(ctx context.Context, n *cluster.Node) error { _, err := n.RLSDomains(ctx); return err }},
		{"an RLS domain", func(ctx context.Context, n *cluster.Node) error { _, _, err := n.RLSConfig(ctx, "edge"); return err }},
		{"a backup", func(ctx context.Context, n *cluster.Node) error { _, err := n.Backup(ctx); return err }},
	}
	for _, r := range reads {
		if !old.Node().IsLeader() {
			t.Fatalf("the old leader stepped down before %s was read: the test proves nothing", r.name)
		}
		ctx, cancel := context.WithTimeout(ctx, 60*time.Millisecond)
		err := r.read(ctx, old.Node())
		cancel()
		if !errors.Is(err, contract.ErrNoLeader) {
			t.Errorf("%s on the cut-off leader: %v, want an error wrapping ErrNoLeader", r.name, err)
		}
	}
	if got, _, err := next.Node().Policy(ctx, "plan"); err != nil || got.Limit.Rate != 1 {
		t.Fatalf("the new leader's read: %+v %v", got.Limit, err)
	}
	c.Net.HealAll()
}
