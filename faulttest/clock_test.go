package faulttest

import (
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// Ten a ten seconds: one token a second, so a test can tell refill by real
// time (a few tokens) from refill by a skewed clock (all of them).
var tenPer10s = algorithms.Limit{Rate: 10, Period: 10 * time.Second, Burst: 10}

// failOverTo kills the leader after giving every other node the clock skew,
// so whichever node takes over has it, and returns the new leader.
func failOverTo(t *testing.T, c *testcluster.Cluster, skew time.Duration) *testcluster.Node {
	t.Helper()
	old := c.WaitLeader()
	for _, n := range c.Running() {
		if n != old {
			n.SetClockSkew(skew)
		}
	}
	old.Kill()
	return c.WaitLeader()
}

// TestFastLeaderClockMintsNothing: a bucket is emptied, then a leader whose
// clock is ten minutes fast takes over. Cluster time must advance with real
// time (plus at most the one-second step the leader may take), not jump ten minutes,
// which would refill the bucket.
func TestFastLeaderClockMintsNothing(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	if d := spend(t, leader, "fast", tenPer10s, 10); !d.Allowed {
		t.Fatal("could not empty the bucket")
	}
	emptied := time.Now()
	next := failOverTo(t, c, 10*time.Minute)
	got := peek(t, next, "fast", tenPer10s)
	// One token a second of real time, plus the documented one-second step
	// the new leader may take, plus one for rounding.
	bound := int64(time.Since(emptied)/time.Second) + 1 + 1
	t.Logf("%s after emptying, a leader 10 minutes fast sees %d remaining (bound %d)", time.Since(emptied), got.Remaining, bound)
	if got.Remaining > bound {
		t.Fatalf("%d tokens back after %s: the fast clock minted tokens", got.Remaining, time.Since(emptied))
	}
}

// TestSlowLeaderClockRefundsNothingAndKeepsRefilling: a leader whose clock
// is ten minutes slow takes over an emptied bucket. No token comes back at
// once (time does not run backwards), and refill goes on at the real pace
// rather than stopping until the slow clock catches up.
func TestSlowLeaderClockRefundsNothingAndKeepsRefilling(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	if d := spend(t, leader, "slow", tenPer10s, 10); !d.Allowed {
		t.Fatal("could not empty the bucket")
	}
	emptied := time.Now()
	next := failOverTo(t, c, -10*time.Minute)
	first := peek(t, next, "slow", tenPer10s)
	if bound := int64(time.Since(emptied)/time.Second) + 1; first.Remaining > bound {
		t.Fatalf("%d tokens back after %s", first.Remaining, time.Since(emptied))
	}
	// Refill goes on: within a few real seconds more tokens are back.
	testenv.WaitFor(t, "tokens to refill under a slow leader (cluster time must go on)", func() bool {
		return peek(t, next, "slow", tenPer10s).Remaining >= first.Remaining+2
	})
	t.Logf("refill resumed %s after emptying under a leader 10 minutes slow", time.Since(emptied))
}
