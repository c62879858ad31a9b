package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/internal/testhooks"
	"github.com/limitnode/limitnode/testcluster"
)

// TestAFollowerThatCannotAppendSaysSo: a follower whose disk is full (every
// append fails) or stuck (every append hangs) falls behind while the
// others go on. It used to say it was ready and serve stale reads: its
// write probe rewrote a small file in place, which a full disk allows, and
// Raft only logs that it cannot append. Now its /readyz answers 503 with
// the reason (it cannot append, or it trails the leader) until its disk
// works again, and it catches up then.
func TestAFollowerThatCannotAppendSaysSo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fail, stall bool
		reason      string
	}{
		{"a full disk", true, false, "cannot append to the log"},
		{"a stuck disk", false, true, "trails the leader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := testcluster.Start(t, 3)
			leader := c.WaitLeader()
			f := c.Followers()[0]
			testhooks.BreakAppends(f.Node(), tt.fail, tt.stall)
			for i := range 50 {
				ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
				_, err := leader.Node().Allow(ctx, contract.Request{Checks: []contract.Check{{Key: fmt.Sprint("k", i), Limit: algorithms.Limit{Rate: 5, PeriodNanos: int64(time.Hour), Burst: 5}, Cost: 1}}})
				cancel()
				if err != nil {
					t.Fatalf("the cluster stopped deciding with one follower's disk broken: %v", err)
				}
			}
			testenv.WaitFor(t, "the follower to say it is not ready", func() bool {
				status, body := do(t, "GET", f.URL()+"/readyz", "")
				reason, _ := body["reason"].(string)
				return status == 503 && strings.Contains(reason, tt.reason)
			})
			testhooks.BreakAppends(f.Node(), false, false)
			testenv.WaitFor(t, "the follower to catch up and be ready again", func() bool {
				status, _ := do(t, "GET", f.URL()+"/readyz", "")
				return status == 200 && f.Node().Status().AppliedIndex >= leader.Node().Status().CommitIndex
			})
		})
	}
}
