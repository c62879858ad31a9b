package cluster_test

import (
	"fmt"
	"strings"
	"testing"

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
				// Through the leader, asked again under its request ID if an
				// election on a loaded machine leaves its outcome unknown.
				if a := decided(t, leader.URL()+"/v1/allow", fmt.Sprintf(`{"key":"k%d","limit":{"rate":5,"period":"1h"}}`, i)); a.status != 200 {
					t.Fatalf("the cluster stopped deciding with one follower's disk broken: %d %+v", a.status, a)
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
