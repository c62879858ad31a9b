package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
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
//
// The README's addresses are a user's: a cluster of theirs may run on them.
// So every 127.0.0.1 port the script names is moved to a free one (the same
// for each mention), the defaults of a node and of the CLI (7070, 7071) are
// moved the same way through LIMITNODE_HTTP, LIMITNODE_RAFT and
// LIMITNODE_ADDR, and the test fails, before it starts anything, if
// something already answers on a port it picked.
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
	ports := portMap{t: t, moved: map[string]string{}}
	rest = ports.rewrite(rest)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "trap 'kill -TERM $(jobs -p) 2>/dev/null; wait' EXIT\nset -e\n"+rest)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LIMITNODE_HTTP="+ports.addr("7070"), "LIMITNODE_RAFT="+ports.addr("7071"), "LIMITNODE_ADDR="+ports.addr("7070"))
	ports.mustBeSilent()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	return string(out)
}

// readmePort is a port as the README's scripts write it: after 127.0.0.1:
// or localhost: in an address, or as an Envoy port_value.
var readmePort = regexp.MustCompile(`(127\.0\.0\.1:|localhost:|port_value: )(\d{2,5})\b`)

// portMap moves a script's ports to free ones, the same free one for each
// mention of a port.
type portMap struct {
	t     *testing.T
	moved map[string]string // README port → free 127.0.0.1 address
}

func (p *portMap) addr(port string) string {
	if a, ok := p.moved[port]; ok {
		return a
	}
	a := testenv.FreeAddr(p.t)
	p.moved[port] = a
	return a
}

func (p *portMap) rewrite(script string) string {
	return readmePort.ReplaceAllStringFunc(script, func(m string) string {
		sub := readmePort.FindStringSubmatch(m)
		_, port, _ := net.SplitHostPort(p.addr(sub[2]))
		return sub[1] + port
	})
}

// mustBeSilent fails the test if anything answers on a picked port: the
// script would talk to a process the test did not start.
func (p *portMap) mustBeSilent() {
	for readme, addr := range p.moved {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			p.t.Fatalf("something already answers on %s (for the README's port %s): not running the script against it", addr, readme)
		}
	}
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
	sentinels := listenOnReadmePorts(t)
	out := runReadmeScript(t, "the README's cluster", script)
	for port, accepted := range sentinels {
		if n := accepted.Load(); n > 0 {
			t.Errorf("the script connected %d times to the README's own port %s", n, port)
		}
	}
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

// listenOnReadmePorts listens on every 127.0.0.1 port the README's scripts
// name, and on the defaults 7070 and 7071, where that port is free, and
// counts the connections each accepts: a test that replays the README must
// never reach them. A port already taken (a user's README cluster) is left
// alone.
func listenOnReadmePorts(t *testing.T) map[string]*atomic.Int64 {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]bool{"7070": true, "7071": true}
	for _, m := range readmePort.FindAllStringSubmatch(string(data), -1) {
		ports[m[2]] = true
	}
	counts := map[string]*atomic.Int64{}
	for port := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			t.Logf("the README's port %s is taken (by a cluster of yours?); it is not watched", port)
			continue
		}
		t.Cleanup(func() { ln.Close() })
		n := &atomic.Int64{}
		counts[port] = n
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				n.Add(1)
				conn.Close()
			}
		}()
	}
	return counts
}
