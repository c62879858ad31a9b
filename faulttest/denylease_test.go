package faulttest

import (
	"context"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/limitnode/limitnode/cluster"
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
			history := raceARaiseWithALease(t, tt.broken)
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
// and returns its history.
func raceARaiseWithALease(t *testing.T, broken bool) []porcupine.Operation {
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
	var history []porcupine.Operation
	ask := func(n *testcluster.Node) allowOutput {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		call := time.Since(start).Nanoseconds()
		out, err := attempt(ctx, n, false, key, 1, 0, "")
		ret := time.Since(start).Nanoseconds()
		if err != nil {
			// Cut off, the follower cannot ask the leader: unknown,
			// and it may take effect until the end of the run.
			return allowOutput{}
		}
		history = append(history, porcupine.Operation{ClientId: 0, Input: allowInput{Key: key, Cost: 1, Via: "go " + n.ID}, Call: call, Output: out, Return: ret})
		return out
	}
	// Spend the bucket and keep asking until the follower holds a lease
	// (the first denial takes it; the next is answered from it).
	leased := false
	for deadline := time.Now().Add(testcluster.WaitTimeout); !leased; {
		if time.Now().After(deadline) {
			t.Fatal("the follower never answered from a deny lease")
		}
		out := ask(follower)
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
	// acknowledgement, a denial from its lease contradicts it.
	ask(follower)
	return history
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
