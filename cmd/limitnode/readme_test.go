package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/internal/testenv"
)

// readmeBlock returns the README's sh block that holds marker.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(data), "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, marker) {
			return block
		}
	}
	t.Fatalf("no sh block of the README holds %q", marker)
	return ""
}

// runReadmeScript runs a README script that starts with its build line, in
// a scratch directory, with the binary built from this tree in place of
// that line, and returns what it printed; the script must succeed.
func runReadmeScript(t *testing.T, what, script string) string {
	t.Helper()
	build, rest, ok := strings.Cut(script, "\n")
	if build != "go build -o limitnode ./cmd/limitnode" || !ok {
		t.Fatalf("%s: the block does not start with its build line: %q", what, build)
	}
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "limitnode"), ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "trap 'kill -TERM $(jobs -p) 2>/dev/null; wait' EXIT\nset -e\n"+rest)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	return string(out)
}

// TestReadmeSecureClusterRuns runs the README's secure three-node cluster
// as it stands: the last call must be allowed.
func TestReadmeSecureClusterRuns(t *testing.T) {
	testenv.NeedPrograms(t, "bash", "curl", "go")
	out := runReadmeScript(t, "the README's secure cluster", readmeBlock(t, "./limitnode certs -dir certs"))
	if !strings.Contains(out, `"allowed":true`) {
		t.Fatalf("the last call was not allowed:\n%s", out)
	}
}

// TestReadmeClusterRuns runs the README's three-node cluster as it stands,
// then the Command line section's commands against it, then the
// reservation and lease examples: n3 must see three members, each command
// must succeed, the last handing leadership to n2, the second reservation
// must be told to wait, and the lease waiter must be listed in the queue,
// then granted after waiting.
func TestReadmeClusterRuns(t *testing.T) {
	testenv.NeedPrograms(t, "bash", "curl", "go")
	script := readmeBlock(t, "-data d3 -join 127.0.0.1:7001 &") + readmeBlock(t, "./limitnode transfer-leadership -to n2") +
		readmeBlock(t, `"max_wait":"2s"`) + readmeBlock(t, `"max_queue":20}' 127.0.0.1:7003/v1/leases &`)
	out := runReadmeScript(t, "the README's cluster", script)
	if !strings.Contains(out, `"wait_ms":`) {
		t.Fatalf("the reservation example's second call was not told to wait:\n%s", out)
	}
	for _, want := range []string{`"position":1`, `"waited_ms":`, `"expires_in_ms":300000`} {
		if !strings.Contains(out, want) {
			t.Fatalf("the lease example's output lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, `"voter":true`); n != 3 {
		t.Fatalf("n3 sees %d voters, want 3:\n%s", n, out)
	}
	for _, want := range []string{"RESTORED AT", "leader is now n2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the Command line section's output lacks %q:\n%s", want, out)
		}
	}
}

// TestReadmeEnvoySectionRuns runs the README's Envoy section as it stands:
// a node with -grpc and -rls-config, grpcurl listing the services through
// reflection and sending Envoy's request until the fourth is over the
// limit.
func TestReadmeEnvoySectionRuns(t *testing.T) {
	testenv.NeedPrograms(t, "bash", "go")
	out := runReadmeScript(t, "the README's Envoy section", readmeBlock(t, "./grpcurl -plaintext 127.0.0.1:8081 list"))
	for _, want := range []string{"edge\n", "envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the output lacks %q:\n%s", want, out)
		}
	}
	if ok, over := strings.Count(out, `"overallCode": "OK"`), strings.Count(out, `"overallCode": "OVER_LIMIT"`); ok != 3 || over != 1 {
		t.Fatalf("%d OK and %d OVER_LIMIT, want 3 and 1:\n%s", ok, over, out)
	}
}
