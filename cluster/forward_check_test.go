package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/testcluster"
)

// TestForwardedWorkIsCheckedBeforeTheLog: a forwarding message that a node
// of this build would never send (a request ID over the bound beside a good
// request; a policy the contract refuses) is refused by the leader before
// anything reaches the log, and the good request beside it is decided.
func TestForwardedWorkIsCheckedBeforeTheLog(t *testing.T) {
	t.Parallel()
	// No checkpoints: nothing but the test appends.
	c := testcluster.Start(t, 3, testcluster.Options{Configure: func(cfg *cluster.Config) { cfg.ConsistencyCheckEvery = -1 }})
	leader := c.WaitLeader()
	follower := c.Followers()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	good := fsm.CheckOf(contract.Check{Key: "k", Limit: algorithms.Limit{Rate: 10, Period: time.Minute, Burst: 10}, Cost: 1})

	before := leader.Node().Status().CommitIndex
	results, err := follower.Node().ForwardRawTo(ctx, leader.RaftAddr, []fsm.Request{
		{RequestID: strings.Repeat("r", contract.MaxRequestIDBytes+1), Checks: []fsm.Check{good}},
	})
	if err != nil || len(results) != 1 || results[0].Rejection == nil || results[0].Rejection.Field != "request_id" {
		t.Fatalf("an oversized request ID: %+v, %v; want a refusal of request_id", results, err)
	}
	if after := leader.Node().Status().CommitIndex; after != before {
		t.Fatalf("the refused request reached the log: commit index %d -> %d", before, after)
	}
	results, err = follower.Node().ForwardRawTo(ctx, leader.RaftAddr, []fsm.Request{
		{Checks: []fsm.Check{good}},
		{RequestID: strings.Repeat("r", contract.MaxRequestIDBytes+1), Checks: []fsm.Check{good}},
	})
	if err != nil || len(results) != 2 || !results[0].Allowed || results[1].Rejection == nil {
		t.Fatalf("a good and a bad request: %+v, %v; want the first allowed, the second refused", results, err)
	}

	bad, err := fsm.Encode(fsm.CommandPutPolicy, &contract.Policy{Name: "p", Limit: algorithms.Limit{Rate: 0, Period: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	before = leader.Node().Status().CommitIndex
	err = follower.Node().ForwardCommandTo(ctx, leader.RaftAddr, bad)
	if rej := contract.As(err); rej == nil || !errors.Is(err, contract.ErrInvalid) {
		t.Fatalf("a policy of rate 0: %v, want an invalid_argument refusal", err)
	}
	allow, err := fsm.Encode(fsm.CommandAllow, &fsm.AllowCommand{})
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.Node().ForwardCommandTo(ctx, leader.RaftAddr, allow); err == nil {
		t.Fatal("the leader appended an allow batch a follower asked for as a command")
	}
	if after := leader.Node().Status().CommitIndex; after != before {
		t.Fatalf("refused commands reached the log: commit index %d -> %d", before, after)
	}
}
