package faulttest

import (
	"context"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/internal/testhooks"
	"github.com/limitnode/limitnode/testcluster"
)

// TestARaiseOutlastsTheDenyLeases races a raising command with a deny lease
// on the node least able to hear of it: a follower answers a flood on a
// spent key from a lease, is cut off from the others, and the key is reset
// through the leader. Every operation goes into a history checked against
// the key's model (a reset empties the key). As the cluster is built, the
// reset is acknowledged only once the cut-off follower's lease has ended,
// so nothing it answers after the acknowledgement contradicts the reset: the
// history is linearizable. Broken on purpose (the leader acknowledges the
// reset at once), the follower still answers from its lease after the
// reset was acknowledged, and the check must catch it.
func TestARaiseOutlastsTheDenyLeases(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		broken bool
	}{{"as built", false}, {"broken: the raise does not wait", true}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A request before the cut whose outcome a loaded machine
			// left unknown is missing from the history: such a run is
			// run again.
			var history []porcupine.Operation
			testenv.WaitFor(t, "a run of the scenario with every outcome known", func() bool {
				var complete bool
				history, complete = raceARaiseWithALease(t, tt.broken)
				return complete
			})
			result, _ := porcupine.CheckOperationsVerbose(limiterModel, history, time.Minute)
			switch {
			case !tt.broken && result != porcupine.Ok:
				t.Fatalf("the history is %v:\n%s", result, describeHistory(history))
			case tt.broken && result != porcupine.Illegal:
				t.Fatalf("with the raise not waiting, the check found the history %v; it must find it Illegal:\n%s", result, describeHistory(history))
			}
		})
	}
}

// raceARaiseWithALease runs the scenario of TestARaiseOutlastsTheDenyLeases
// and returns its history, complete unless a request before the cut got
// no answer (its outcome is then unknown, and not in the history).
func raceARaiseWithALease(t *testing.T, broken bool) (history []porcupine.Operation, complete bool) {
	t.Helper()
	// Leases of up to 5 s: long enough that, broken, the follower still
	// holds its lease when a loaded machine has acknowledged the reset.
	c := testcluster.Start(t, 3, testcluster.Options{Configure: func(cfg *cluster.Config) { cfg.DenyLeaseCap = 5 * time.Second }})
	leader := c.WaitLeader()
	if broken {
		for _, n := range c.Nodes {
			testhooks.SkipRaiseWait(n.Node())
		}
	}
	follower := c.Followers()[0]
	const key = "slow-0" // 3 an hour: spent by three requests of cost 1, and denied for the whole test
	start := time.Now()
	ask := func(n *testcluster.Node, within time.Duration) (allowOutput, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		call := time.Since(start).Nanoseconds()
		out, err := attempt(ctx, n, false, key, 1, 0, "")
		ret := time.Since(start).Nanoseconds()
		if err != nil {
			return allowOutput{}, false
		}
		history = append(history, porcupine.Operation{ClientId: 0, Input: allowInput{Key: key, Cost: 1, Via: "go " + n.ID}, Call: call, Output: out, Return: ret})
		return out, true
	}
	// Spend the bucket and keep asking until the follower holds a lease
	// (the first denial takes it; the next is answered from it).
	leased := false
	for deadline := time.Now().Add(testcluster.WaitTimeout); !leased; {
		if time.Now().After(deadline) {
			t.Fatal("the follower never answered from a deny lease")
		}
		out, ok := ask(follower, 5*time.Second)
		if !ok {
			return history, false
		}
		leased = out.Leased
	}
	// Cut the follower off both ways, and reset the key through the
	// leader.
	for _, other := range c.Nodes {
		if other != follower {
			c.Net.Partition([]string{follower.ID}, []string{other.ID})
		}
	}
	call := time.Since(start).Nanoseconds()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := leader.Node().ResetKey(ctx, key)
	cancel()
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	history = append(history, porcupine.Operation{ClientId: 1, Input: allowInput{Key: key, Reset: true, Via: "go " + leader.ID}, Call: call, Output: allowOutput{}, Return: time.Since(start).Nanoseconds()})
	// Ask the cut-off follower at once: after the reset's
	// acknowledgement, a denial from its lease contradicts it. Cut off,
	// it cannot ask the leader: without a lease it has no answer, and its
	// request cannot take effect.
	ask(follower, 300*time.Millisecond)
	return history, true
}

// describeHistory lists a history's operations in the order they were
// called.
func describeHistory(history []porcupine.Operation) string {
	out := ""
	for _, op := range history {
		out += limiterModel.DescribeOperation(op.Input, op.Output) + "\n"
	}
	return out
}
