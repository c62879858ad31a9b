// Package examples_test keeps the README's Go snippets true: each is a
// program under examples/, shown whole, and the programs run here.
package examples_test

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// snippetSource matches the line that names a snippet's program, a link
// such as [`examples/guard/main.go`](examples/guard/main.go):
var snippetSource = regexp.MustCompile("^\\[`(examples/[a-z0-9_/-]+\\.go)`\\]")

// TestReadmeSnippetsAreTheExamples: every Go code block of the README is
// the whole of the program the line before it names.
func TestReadmeSnippetsAreTheExamples(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	found := 0
	for i, line := range lines {
		if line != "```go" {
			continue
		}
		found++
		var source string
		for j := i - 1; j >= 0 && source == ""; j-- {
			if m := snippetSource.FindStringSubmatch(lines[j]); m != nil {
				source = m[1]
			} else if strings.TrimSpace(lines[j]) != "" {
				break
			}
		}
		if source == "" {
			t.Errorf("README line %d: a Go block not preceded by the link to its program under examples/", i+1)
			continue
		}
		end := i + 1
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		snippet := strings.Join(lines[i+1:end], "\n") + "\n"
		program, err := os.ReadFile(filepath.Join("..", source))
		if err != nil {
			t.Errorf("README line %d: %v", i+1, err)
			continue
		}
		if snippet != string(program) {
			t.Errorf("README line %d: the snippet differs from %s; copy the file into the README", i+1, source)
		}
	}
	if found == 0 {
		t.Fatal("no Go snippet found in the README")
	}
}

// freeAddr returns a 127.0.0.1 address with a port the OS picked.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestEmbeddedExampleDecides runs the embedding example as a user would:
// it bootstraps a node and is allowed its first request.
func TestEmbeddedExampleDecides(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "run", ".", "-bootstrap", "-raft", freeAddr(t), "-http", freeAddr(t), "-data", t.TempDir())
	cmd.Dir = "embedded"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./examples/embedded: %v\n%s", err, out)
	}
	if !containsLine(string(out), "allowed; 99 left") {
		t.Fatalf("the example did not report its decision:\n%s", out)
	}
}

func containsLine(out, want string) bool {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if strings.HasSuffix(sc.Text(), want) {
			return true
		}
	}
	return false
}

// TestGuardExampleFallsBackLocally runs the client example with no cluster
// to reach: its local limiter answers with this replica's share.
func TestGuardExampleFallsBackLocally(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "run", ".", freeAddr(t))
	cmd.Dir = "guard"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./examples/guard: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "the cluster could not decide") || !containsLine(string(out), "allowed: true, remaining: 32") {
		t.Fatalf("the example did not fall back to its share (100/3 a minute):\n%s", out)
	}
}
