package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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

// TestHelpListsEveryCommand: limitnode -h names every command the binary
// dispatches, and every verb of those that take one, each on its own line
// with what it does.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	_, help, status := limitnodeCLI(t, bin, "-h")
	if status != exitOK {
		t.Fatalf("limitnode -h: exit %d: %s", status, help)
	}
	for name := range subcommands {
		line := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + `( [a-z|]+)?  +\S`).FindString(help)
		if line == "" {
			t.Errorf("limitnode -h does not list %q with what it does:\n%s", name, help)
			continue
		}
		// A command with verbs says which when given none; -h lists the same.
		_, usage, _ := limitnodeCLI(t, bin, name, "-h")
		if verbs := regexp.MustCompile(`^Usage: limitnode ` + regexp.QuoteMeta(name) + ` ([a-z]+(\|[a-z]+)+) `).FindStringSubmatch(usage); verbs != nil && !strings.Contains(line, " "+verbs[1]+" ") {
			t.Errorf("limitnode %s takes %s, but -h lists %q", name, verbs[1], line)
		}
	}
}

// TestAFlagTypoIsOneLineWithTheNearestFlag: a mistyped flag, of a node or
// of a command, is one line on stderr naming the flags nearest to it and
// the command that lists them all, with exit status 2; no usage dump.
func TestAFlagTypoIsOneLineWithTheNearestFlag(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-jion", "127.0.0.1:7001"}, "flag provided but not defined: -jion; did you mean -join? (limitnode -h lists the flags)"},
		{[]string{"-id", "n1", "-log-levle", "debug"}, "did you mean -log-level? (limitnode -h lists the flags)"},
		{[]string{"-raft-idle", "1m"}, "did you mean -raft-idle-timeout?"},
		{[]string{"status", "-adr", "127.0.0.1:7001"}, "flag provided but not defined: -adr; did you mean -addr? (limitnode status -h lists the flags)"},
		{[]string{"policy", "put", "-jsn"}, "did you mean -json? (limitnode policy put -h lists the flags)"},
		{[]string{"token", "-role", "admin"}, "did you mean -roles? (limitnode token -h lists the flags)"},
		{[]string{"-xyzzy"}, "flag provided but not defined: -xyzzy (limitnode -h lists the flags)"},
		{[]string{"-join-timeout", "forever"}, `invalid value "forever" for flag -join-timeout`},
	}
	for _, tt := range tests {
		_, stderr, status := limitnodeCLI(t, bin, tt.args...)
		if status != exitUsage || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "Usage") {
			t.Errorf("limitnode %s: exit %d, stderr %q; want exit 2 and one line with %q", strings.Join(tt.args, " "), status, stderr, tt.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"join", "join", 0},
		{"jion", "join", 1},
		{"joi", "join", 1},
		{"joins", "join", 1},
		{"jxin", "join", 1},
		{"adr", "addr", 1},
		{"", "id", 2},
		{"log-levle", "log-level", 1},
		{"xyzzy", "id", 5},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestAMistypedVariableIsAWarning: a LIMITNODE_ variable that nothing
// reads is named in a warning, with the known name nearest to it, by a
// node (in its log) and by a command (on stderr); its value is never
// repeated.
func TestAMistypedVariableIsAWarning(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addrs.json")
	node := exec.Command(bin, "-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"), "-addr-file", addrFile)
	node.Env = []string{"PATH=" + os.Getenv("PATH"), "LIMITNODE_LOG_LEVLE=debug-value", "LIMITNODE_COLOUR=blue-value"}
	var logs testenv.SyncBuffer
	node.Stdout, node.Stderr = &logs, &logs
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Process.Kill(); _ = node.Wait() })
	var addrs boundAddrs
	testenv.WaitFor(t, "the node to serve", func() bool {
		var ok bool
		addrs, ok = readAddrFile(t, addrFile)
		return ok
	})
	l := logs.String()
	if !strings.Contains(l, "level=WARN") || !strings.Contains(l, "variable=LIMITNODE_LOG_LEVLE did_you_mean=LIMITNODE_LOG_LEVEL") ||
		!strings.Contains(l, "variable=LIMITNODE_COLOUR") || strings.Contains(l, "-value") {
		t.Errorf("the node's log does not name the mistyped variables (or repeats a value):\n%s", l)
	}

	cmd := exec.Command(bin, "status", "-addr", addrs.HTTP)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LIMITNODE_TOKNE=ln_secret-value"}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "limitnode: warning: ignored LIMITNODE_TOKNE, which nothing reads; did you mean LIMITNODE_TOKEN?") || strings.Contains(string(out), "secret-value") {
		t.Errorf("limitnode status with LIMITNODE_TOKNE set: %v\n%s", err, out)
	}
}

// TestPolicyPutSaysWhereTheJSONBreaks: limitnode policy put with a file
// that is not JSON says the line, column and byte of the mistake, and
// sends nothing.
func TestPolicyPutSaysWhereTheJSONBreaks(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	c := testcluster.Start(t, 1)
	addr := c.WaitLeader().HTTPAddr
	dir := t.TempDir()
	tests := []struct {
		name, file, want string
	}{
		{"a missing comma", "{\n  \"limit\": {\"rate\": 10, \"period\": \"1m\"}\n  \"key_template\": \"{tenant}\"\n}\n", "missing.json: line 3, column 3 (byte 44): not a policy: invalid character '\"' after object key:value pair"},
		{"a value of the wrong type", "{\"limit\": {\"rate\": \"ten\"}}", "wrong.json: line 1, column 25 (byte 24): not a policy:"},
		{"a file that ends early", "{\"limit\": {\"rate\": 10}\n", "early.json: line 2, column 1 (byte 23): not a policy: unexpected EOF"},
		{"something after the policy", "{\"limit\": {\"rate\": 10}}\n}", "after.json: line 2, column 1 (byte 24): the file must hold a policy, one JSON value, and nothing after it"},
	}
	for _, tt := range tests {
		name := strings.Fields(tt.want)[0]
		file := filepath.Join(dir, strings.TrimSuffix(name, ":"))
		if err := os.WriteFile(file, []byte(tt.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, stderr, status := limitnodeCLI(t, bin, "policy", "put", "p", file, "-addr", addr)
		if status != exitError || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: exit %d, %q; want exit 1 with %q", tt.name, status, stderr, tt.want)
		}
	}
	if stdout, _, _ := limitnodeCLI(t, bin, "policy", "list", "-addr", addr); strings.Contains(stdout, "\np ") {
		t.Errorf("a broken file stored a policy:\n%s", stdout)
	}
}

// TestAWrongTokenIsNotAMissingOne: a node with tokens tells a call with no
// token, one with an Authorization header that is not a bearer token, and
// one with a token it does not know apart, over HTTP and through the
// commands, without repeating any of the token.
func TestAWrongTokenIsNotAMissingOne(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	dir := t.TempDir()
	_, entry := newToken(t, "ops", "admin")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, entry)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"), "-auth", tokens}, nil)

	const wrong = "ln_wrongtokenXYZ"
	tests := []struct {
		name, authorization, wantMessage, wantChallenge string
	}{
		{"no token", "", "this call needs a bearer token: Authorization: Bearer <token>", `Bearer realm="limitnode"`},
		{"not a bearer token", "Basic b3BzOnNlY3JldA==", "the Authorization header holds no bearer token", `Bearer realm="limitnode"`},
		{"an unknown token", "Bearer " + wrong, "the bearer token given matches none of this cluster's tokens", `Bearer realm="limitnode", error="invalid_token"`},
	}
	for _, tt := range tests {
		header := map[string]string{}
		if tt.authorization != "" {
			header["Authorization"] = tt.authorization
		}
		a := ask(t, ctx, http.MethodGet, "http://"+n.addr+"/v1/cluster", "", "", header)
		if a.status != http.StatusUnauthorized || !strings.Contains(a.body, tt.wantMessage) || a.header.Get("WWW-Authenticate") != tt.wantChallenge ||
			strings.Contains(a.body, "XYZ") || strings.Contains(a.body, "b3Bz") {
			t.Errorf("%s: %d %s (WWW-Authenticate %q); want 401 saying %q, challenge %q", tt.name, a.status, a.body, a.header.Get("WWW-Authenticate"), tt.wantMessage, tt.wantChallenge)
		}
	}

	_, stderr, status := limitnodeCLI(t, bin, "status", "-addr", n.addr)
	if status != exitError || !strings.Contains(stderr, "this call needs a bearer token") || !strings.Contains(stderr, "(give an API token with -token or LIMITNODE_TOKEN)") {
		t.Errorf("limitnode status without a token: exit %d, %q", status, stderr)
	}
	_, stderr, status = limitnodeCLI(t, bin, "status", "-addr", n.addr, "-token", wrong)
	if status != exitError || !strings.Contains(stderr, "matches none of this cluster's tokens") || !strings.Contains(stderr, "(the token given with -token or LIMITNODE_TOKEN is not one of the cluster's)") || strings.Contains(stderr, "XYZ") {
		t.Errorf("limitnode status with an unknown token: exit %d, %q", status, stderr)
	}
}

// TestJoinGivenARaftAddressSaysSo: a node started with -join naming a
// member's Raft address, as a joiner or to form a cluster, stops at once
// saying that it is a Raft port and that -join takes HTTP addresses; a
// command given it with -addr says the same. The member's Raft port
// answers the HTTP request in HTTP rather than resetting it.
func TestJoinGivenARaftAddressSaysSo(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "go")
	bin := buildBinary(t)
	member := startBinary(t, "-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir())
	raft := member.addrs.Raft
	const want = "this is the Raft port of a limitnode node, not its HTTP API: give the node's HTTP address (its -http)"
	for _, args := range [][]string{
		{"-id", "n2", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(), "-join", raft, "-join-timeout", "20s"},
		{"-id", "n2", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(), "-join", raft + ",127.0.0.1:1", "-bootstrap-expect", "2"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err()
		cancel()
		if timedOut != nil || cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), "limitnode: -join "+raft+": "+want) || strings.Contains(string(out), "connection reset") {
			t.Errorf("limitnode %s: %v (after 15 s: %v); want exit 2 at once, saying %q:\n%s", strings.Join(args, " "), err, timedOut, want, out)
		}
	}
	_, stderr, status := limitnodeCLI(t, bin, "status", "-addr", raft)
	if status != exitError || !strings.Contains(stderr, "421 wrong_port: "+want) {
		t.Errorf("limitnode status -addr %s: exit %d, %q", raft, status, stderr)
	}
	if !strings.Contains(member.out.String(), "answered an HTTP request on the raft port") {
		t.Errorf("the member did not log the HTTP requests on its Raft port:\n%s", member.out.String())
	}
}
