// Package examples_test keeps the README's Go snippets true: each is a
// program under examples/, shown whole, and the programs run here.
package examples_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
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
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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

// TestEmbeddedExampleDecides runs the embedding example as a user would:
// it bootstraps a node and is allowed its first request.
func TestEmbeddedExampleDecides(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "run", ".", "-bootstrap", "-raft", testenv.FreeAddr(t), "-http", testenv.FreeAddr(t), "-data", t.TempDir())
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
	cmd := exec.Command("go", "run", ".", testenv.FreeAddr(t))
	cmd.Dir = "guard"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./examples/guard: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "the cluster could not decide") || !containsLine(string(out), "allowed: true, remaining: 32") {
		t.Fatalf("the example did not fall back to its share (100/3 a minute):\n%s", out)
	}
}

// TestMiddlewareExampleLimitsPerUser runs the middleware example against a
// test cluster, as a user would: exports cost 10 of a user's 100 a minute,
// so the eleventh is denied; another user is not; a request without a
// valid token is a 401.
func TestMiddlewareExampleLimitsPerUser(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	c.WaitLeader()
	if strings.HasPrefix(c.Nodes[0].URL(), "https://") {
		t.Skip("LIMITNODE_TEST_SECURE: the example talks plain HTTP to the cluster, without a token")
	}
	bin := filepath.Join(t.TempDir(), "middleware")
	if out, err := exec.Command("go", "build", "-o", bin, "./middleware").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr := testenv.FreeAddr(t)
	cmd := exec.Command(bin, "-listen", addr, "-secret", "s3cret", c.Nodes[0].HTTPAddr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	post := func(token string) int {
		req, _ := http.NewRequest("POST", "http://"+addr+"/export", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	alice, bob := jwtHS256(t, "s3cret", "alice"), jwtHS256(t, "s3cret", "bob")
	for deadline := time.Now().Add(30 * time.Second); post("") != http.StatusUnauthorized; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the example did not start serving")
		}
	}
	for i := range 10 {
		if got := post(alice); got != http.StatusOK {
			t.Fatalf("alice's export %d: %d", i+1, got)
		}
	}
	if got := post(alice); got != http.StatusTooManyRequests {
		t.Fatalf("alice's eleventh export: %d, want 429", got)
	}
	if got := post(bob); got != http.StatusOK {
		t.Fatalf("bob's first export: %d", got)
	}
	if got := post(jwtHS256(t, "another secret", "mallory")); got != http.StatusUnauthorized {
		t.Fatalf("a token of another key: %d, want 401", got)
	}
}

// jwtHS256 makes a token for sub, valid for an hour.
func jwtHS256(t *testing.T, secret, sub string) string {
	t.Helper()
	enc := func(v any) string {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(data)
	}
	signed := enc(map[string]string{"alg": "HS256", "typ": "JWT"}) + "." + enc(map[string]any{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// TestGRPCExampleLimitsPerAPIKey runs the gRPC example against a test
// cluster: five Check calls a minute per API key, the sixth refused with
// RESOURCE_EXHAUSTED, another key unaffected, no key UNAUTHENTICATED.
func TestGRPCExampleLimitsPerAPIKey(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	c.WaitLeader()
	if strings.HasPrefix(c.Nodes[0].URL(), "https://") {
		t.Skip("LIMITNODE_TEST_SECURE: the example talks plain HTTP to the cluster, without a token")
	}
	bin := filepath.Join(t.TempDir(), "grpclimit")
	if out, err := exec.Command("go", "build", "-o", bin, "./grpclimit").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr := testenv.FreeAddr(t)
	cmd := exec.Command(bin, "-listen", addr, c.Nodes[0].HTTPAddr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	call := func(key string) codes.Code {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if key != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
		}
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		return status.Code(err)
	}
	for i := range 5 {
		if code := call("key-1"); code != codes.OK {
			t.Fatalf("call %d: %v", i+1, code)
		}
	}
	if code := call("key-1"); code != codes.ResourceExhausted {
		t.Fatalf("sixth call: %v, want ResourceExhausted", code)
	}
	if code := call("key-2"); code != codes.OK {
		t.Fatalf("another key: %v", code)
	}
	if code := call(""); code != codes.Unauthenticated {
		t.Fatalf("no key: %v, want Unauthenticated", code)
	}
}
