package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// TestDenialsAppendNoEntry spends a key's limit, then asks for it again
// through every node, with one check and with several: every answer is a
// denial, with the decision's fields, and the log does not grow. An allowed
// request still appends.
func TestDenialsAppendNoEntry(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	ctx := context.Background()
	limit := algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 2, Period: time.Hour, Burst: 2}
	spend := contract.Request{Checks: []contract.Check{{Key: "flood", Limit: limit, Cost: 2}}}
	if d, err := leader.Node().Allow(ctx, spend); err != nil || !d.Allowed {
		t.Fatalf("spend: %+v %v", d, err)
	}
	c.WaitConverged()
	before := leader.Node().Status().CommitIndex
	requests := []contract.Request{
		{Checks: []contract.Check{{Key: "flood", Limit: limit, Cost: 1}}},
		{Checks: []contract.Check{{Key: "other", Limit: limit, Cost: 1}, {Key: "flood", Limit: limit, Cost: 1}}},
	}
	for _, n := range c.Nodes {
		for i, req := range requests {
			d, err := n.Node().Allow(ctx, req)
			if err != nil || d.Allowed {
				t.Fatalf("%s, request %d: %+v %v, want a denial", n.ID, i, d, err)
			}
			last := d.Checks[len(d.Checks)-1]
			if last.Limit != 2 || last.Remaining != 0 || last.RetryAfter <= 0 || d.AtNanos == 0 {
				t.Fatalf("%s, request %d: the denial's fields %+v at %d", n.ID, i, last, d.AtNanos)
			}
		}
	}
	if after := leader.Node().Status().CommitIndex; after != before {
		t.Fatalf("denials appended %d entries", after-before)
	}
	if d, err := leader.Node().Allow(ctx, contract.Request{Checks: []contract.Check{{Key: "other", Limit: limit, Cost: 1}}}); err != nil || !d.Allowed {
		t.Fatalf("an allowed request: %+v %v", d, err)
	}
	if after := leader.Node().Status().CommitIndex; after == before {
		t.Fatal("an allowed request appended no entry")
	}
}

// TestADeniedRequestIDKeepsItsAnswer: a request with an ID is denied through
// the log, so the FSM remembers the denial, and the same ID asked again
// after the key is reset (as an earlier attempt still on its way would
// land) is answered with that denial, not admitted. Were the denial
// answered without an entry, nothing would remember it, and one operation
// could be both denied and charged.
func TestADeniedRequestIDKeepsItsAnswer(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	ctx := context.Background()
	limit := algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 2, Period: time.Hour, Burst: 2}
	spend := contract.Request{Checks: []contract.Check{{Key: "flood", Limit: limit, Cost: 2}}}
	if d, err := leader.Node().Allow(ctx, spend); err != nil || !d.Allowed {
		t.Fatalf("spend: %+v %v", d, err)
	}
	// A denial without an ID first, so the key counts as recently denied
	// and the fast path would look at the next one.
	if d, err := leader.Node().Allow(ctx, contract.Request{Checks: []contract.Check{{Key: "flood", Limit: limit, Cost: 1}}}); err != nil || d.Allowed {
		t.Fatalf("a denial without an ID: %+v %v", d, err)
	}
	for _, n := range c.Nodes {
		req := contract.Request{RequestID: "retried-" + n.ID, Checks: []contract.Check{{Key: "flood", Limit: limit, Cost: 1}}}
		before := leader.Node().Status().CommitIndex
		d, err := n.Node().Allow(ctx, req)
		if err != nil || d.Allowed {
			t.Fatalf("%s: %+v %v, want a denial", n.ID, d, err)
		}
		if after := leader.Node().Status().CommitIndex; after == before {
			t.Fatalf("%s: a request with an ID was denied without an entry", n.ID)
		}
		if _, err := leader.Node().ResetKey(ctx, "flood"); err != nil {
			t.Fatal(err)
		}
		again, err := n.Node().Allow(ctx, req)
		if err != nil || again.Allowed || !again.Duplicate {
			t.Fatalf("%s: the same ID after a reset: %+v %v, want its first answer, a denial, as a duplicate", n.ID, again, err)
		}
		if d, err := leader.Node().Allow(ctx, spend); err != nil || !d.Allowed {
			t.Fatalf("%s: spend again after the reset: %+v %v", n.ID, d, err)
		}
	}
}

// TestDeposedLeaderAnswersNoDenialFromStaleState cuts the leader off, has
// the new leader raise the limit its state still denies, and asks the old
// leader: it must not deny from what it holds (it can no longer confirm
// its leadership), and the majority side admits.
func TestDeposedLeaderAnswersNoDenialFromStaleState(t *testing.T) {
	t.Parallel()
	// n1, the first leader, keeps believing it leads for 15 s without a
	// quorum (as a paused or slow leader would), long enough for the
	// others to elect a new leader and raise the limit on a loaded
	// machine.
	c := testcluster.Start(t, 3, testcluster.Options{Configure: func(cfg *cluster.Config) {
		if cfg.ID == "n1" {
			cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 15*time.Second, 15*time.Second, 15*time.Second
		}
	}})
	old := c.WaitLeader()
	if old.ID != "n1" {
		t.Fatalf("the first leader is %s, not n1", old.ID)
	}
	ctx := context.Background()
	tight := contract.Policy{Name: "plan", Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 1, Period: time.Hour, Burst: 1}}
	if err := old.Node().PutPolicy(ctx, tight); err != nil {
		t.Fatal(err)
	}
	req := contract.Request{Checks: []contract.Check{{Policy: "plan", Key: "tenant", Cost: 1}}}
	if d, err := old.Node().Allow(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("the first: %+v %v", d, err)
	}
	if d, err := old.Node().Allow(ctx, req); err != nil || d.Allowed {
		t.Fatalf("the second, before the cut: %+v %v, want a denial", d, err)
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
	raised := tight
	raised.Limit.Rate, raised.Limit.Burst = 100, 100
	if err := next.Node().PutPolicy(ctx, raised); err != nil {
		t.Fatal(err)
	}
	// The old leader does not know yet that it was deposed: whatever it
	// answers must not be a denial taken from its stale state.
	if !old.Node().IsLeader() {
		t.Fatal("the old leader stepped down before it was asked: the test proves nothing")
	}
	ctx2, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	d, err := old.Node().Allow(ctx2, req)
	cancel()
	if err == nil {
		t.Fatalf("the cut-off leader decided (allowed=%v at %d); the majority had raised the limit", d.Allowed, d.AtNanos)
	}
	if d, err := next.Node().Allow(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("the new leader under the raised limit: %+v %v", d, err)
	}
	c.Net.HealAll()
}
