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
