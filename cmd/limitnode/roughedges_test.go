package main

import (
	"strings"
	"testing"

	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// The rough edges a new user met with the binary: each answer says what
// went wrong and what to do, in the words of the command line.

// TestARefusedRemovalNamesTheCommandThatForcesIt: removing a member while
// another is down would leave too few voters answering; the 409 names the
// command line that forces it, "limitnode remove -force ID" (there is no
// "limitnode -force").
func TestARefusedRemovalNamesTheCommandThatForcesIt(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	followers := c.Followers()
	followers[0].Kill()
	_, stderr, status := limitnodeCLI(t, bin, "remove", followers[1].ID, "-addr", leader.HTTPAddr)
	want := "limitnode remove -force " + followers[1].ID + ")"
	if status != exitError || !strings.Contains(stderr, "409") || !strings.Contains(stderr, want) {
		t.Fatalf("limitnode remove %s with %s down: exit %d, %q; want exit 1, a 409 naming %q", followers[1].ID, followers[0].ID, status, stderr, want)
	}
}

// TestARemovedNodeSaysItWasRemoved: a member removed with limitnode remove
// says so, with what to do, to its health check and to a decision asked of
// it, and again once restarted on its data; never "not joined yet" or
// "no leader could be reached".
func TestARemovedNodeSaysItWasRemoved(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	removed := c.Followers()[0]
	if _, stderr, status := limitnodeCLI(t, bin, "remove", removed.ID, "-addr", leader.HTTPAddr); status != exitOK {
		t.Fatalf("limitnode remove %s: exit %d: %s", removed.ID, status, stderr)
	}
	says := func(when string) {
		t.Helper()
		var stderr string
		testenv.WaitFor(t, "the removed node to learn it was removed", func() bool {
			_, stderr, _ = limitnodeCLI(t, bin, "health", "-addr", removed.HTTPAddr)
			return strings.Contains(stderr, "was removed from the cluster")
		})
		if !strings.Contains(stderr, "limitnode join -id ID -raft RAFT_ADDR") || strings.Contains(stderr, "not joined yet") {
			t.Errorf("%s: limitnode health on the removed node: %q; want it to say what to do", when, stderr)
		}
		_, stderr, status := limitnodeCLI(t, bin, "allow", "-addr", removed.HTTPAddr, "-key", "k", "-rate", "10", "-period", "1m")
		if status != exitError || !strings.Contains(stderr, "removed from the cluster") || !strings.Contains(stderr, "limitnode join") || strings.Contains(stderr, "no leader could be reached") {
			t.Errorf("%s: a decision asked of the removed node: exit %d, %q; want a 503 saying it was removed and what to do", when, status, stderr)
		}
	}
	says("removed while running")
	removed.Stop()
	removed.Restart()
	says("restarted on its data")
}
