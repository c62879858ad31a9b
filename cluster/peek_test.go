package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/testcluster"
)

// TestGoCallersPeekExplicitly drives the Go API's cost rules: a check's
// zero Cost consumes 1, as a Go caller's zero value should, only Peek looks
// without consuming, and a peek that names a cost is refused.
func TestGoCallersPeekExplicitly(t *testing.T) {
	t.Parallel()
	node := testcluster.Start(t, 1).WaitLeader().Node()
	ctx := context.Background()
	limit := algorithms.Limit{Rate: 3, Period: time.Hour, Burst: 3}
	remaining := func(check contract.Check) int64 {
		t.Helper()
		d, err := node.Allow(ctx, contract.Request{Checks: []contract.Check{check}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Checks[0].Remaining
	}
	if got := remaining(contract.Check{Key: "peek", Limit: limit, Peek: true}); got != 3 {
		t.Fatalf("a peek at a full bucket saw %d remaining, want 3", got)
	}
	if got := remaining(contract.Check{Key: "peek", Limit: limit}); got != 2 {
		t.Fatalf("a check without a cost left %d remaining, want 2: a zero Cost consumes 1", got)
	}
	if got := remaining(contract.Check{Key: "peek", Limit: limit, Peek: true}); got != 2 {
		t.Fatalf("a peek consumed: %d remaining, want 2", got)
	}
	if got := remaining(contract.Check{Key: "peek", Limit: limit, Cost: 2}); got != 0 {
		t.Fatalf("a cost of 2 left %d remaining, want 0", got)
	}
	_, err := node.Allow(ctx, contract.Request{Checks: []contract.Check{{Key: "peek", Limit: limit, Peek: true, Cost: 1}}})
	if e := contract.As(err); e == nil || e.Field != "checks[0].cost" {
		t.Fatalf("a peek with a cost answered %v, want a refusal naming checks[0].cost", err)
	}
}
