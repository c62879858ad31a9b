package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
)

// TestFastDenialAfterABarrier ends the log with a barrier, which
// hashicorp/raft never hands to a BatchingFSM, so the FSM's index stays
// below the commit index: a denial is still answered from the state, with
// no entry appended (replica.hasApplied reads the gap from the log store).
func TestFastDenialAfterABarrier(t *testing.T) {
	t.Parallel()
	n, err := Open(Config{ID: "n1", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(), Bootstrap: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	testenv.WaitFor(t, "the node to lead", n.IsLeader)
	ctx := context.Background()
	req := contract.Request{Checks: []contract.Check{{Key: "k", Cost: 1,
		Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 1, Period: time.Hour, Burst: 1}}}}
	if d, err := n.Allow(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("the first: %+v %v", d, err)
	}
	if err := n.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	before := n.raft.CommitIndex()
	if n.fsm.LastIndex() >= before {
		t.Fatalf("the FSM saw the barrier (index %d, commit %d): nothing to test", n.fsm.LastIndex(), before)
	}
	if d, err := n.Allow(ctx, req); err != nil || d.Allowed {
		t.Fatalf("the second: %+v %v, want a denial", d, err)
	}
	if after := n.raft.CommitIndex(); after != before {
		t.Fatalf("the denial appended %d entries", after-before)
	}
}
