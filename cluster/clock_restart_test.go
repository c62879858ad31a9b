package cluster_test

import (
	"testing"
	"time"

	"github.com/limitnode/limitnode/testcluster"
)

// TestAfterAFullRestartNowIsNow: every node stops, and comes back half a
// minute later (their clocks moved on while they were down). The cluster's
// reading of now (/v1/stats' now_unix_ms, and what blocks count their end
// from) is the leader's clock within seconds, not the last stamp before the
// restart: it was 31.7 s behind until the next decision.
func TestAfterAFullRestartNowIsNow(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitConverged()
	c.StopAll()
	const down = 30 * time.Second
	for _, n := range c.Nodes {
		n.SetClockSkew(down)
		n.Restart()
	}
	c.WaitConverged()
	leader := c.WaitLeader()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, st := do(t, "GET", leader.URL()+"/v1/stats", "")
		if status != 200 {
			t.Fatalf("stats: %d %v", status, st)
		}
		now := time.UnixMilli(int64(st["now_unix_ms"].(float64)))
		behind := time.Now().Add(down).Sub(now)
		if behind < 2*time.Second && behind > -2*time.Second {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("now_unix_ms is %v behind the cluster's clocks after a full restart", behind)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
