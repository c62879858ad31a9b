package faulttest

import (
	"context"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// peek returns the remaining units of key under limit, asking node, retrying
// while the cluster has no leader.
func peek(t testing.TB, node *testcluster.Node, key string, limit algorithms.Limit) contract.CheckDecision {
	t.Helper()
	var d contract.Decision
	testenv.WaitFor(t, "a peek of "+key+" on "+node.ID+" to be answered", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		d, err = node.Node().Allow(ctx, contract.Request{Checks: []contract.Check{{Key: key, Limit: limit, Peek: true}}})
		return err == nil
	})
	return d.Checks[0]
}

func spend(t testing.TB, node *testcluster.Node, key string, limit algorithms.Limit, cost int64) contract.Decision {
	t.Helper()
	d, err := node.Node().Allow(context.Background(), contract.Request{Checks: []contract.Check{{Key: key, Limit: limit, Cost: cost}}})
	if err != nil {
		t.Fatalf("spend on %s: %v", node.ID, err)
	}
	return d
}
