// Package examples_test keeps the Go snippets of the README and docs/
// true: each is a program under examples/, shown whole, and the programs
// run here.
package examples_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// snippetSource matches the line that names a snippet's program, a link
// such as [`examples/guard/main.go`](../examples/guard/main.go):
var snippetSource = regexp.MustCompile("^\\[`(examples/[a-z0-9_/-]+\\.go)`\\]")

// TestDocSnippetsAreTheExamples: every Go code block of the README and of
// docs/ is the whole of the program the line before it names, and every
// program under examples/ is shown on some page.
func TestDocSnippetsAreTheExamples(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	for _, page := range append([]string{"../README.md"}, pages...) {
		for _, source := range snippetsOf(t, page) {
			shown[source] = true
		}
	}
	programs, err := filepath.Glob("*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range programs {
		if !shown["examples/"+p] {
			t.Errorf("examples/%s is shown on no page of the README or docs/", p)
		}
	}
}

// snippetsOf checks the Go blocks of page against their programs and
// returns the programs' paths.
func snippetsOf(t *testing.T, page string) []string {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	var sources []string
	for i, line := range lines {
		if line != "```go" {
			continue
		}
		var source string
		for j := i - 1; j >= 0 && source == ""; j-- {
			if m := snippetSource.FindStringSubmatch(lines[j]); m != nil {
				source = m[1]
			} else if strings.TrimSpace(lines[j]) != "" {
				break
			}
		}
		if source == "" {
			t.Errorf("%s line %d: a Go block not preceded by the link to its program under examples/", page, i+1)
			continue
		}
		end := i + 1
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		snippet := strings.Join(lines[i+1:end], "\n") + "\n"
		program, err := os.ReadFile(filepath.Join("..", source))
		if err != nil {
			t.Errorf("%s line %d: %v", page, i+1, err)
			continue
		}
		if snippet != string(program) {
			t.Errorf("%s line %d: the snippet differs from %s; copy the file into the page", page, i+1, source)
		}
		sources = append(sources, source)
	}
	return sources
}

// TestEmbeddedExampleDecides runs the embedding example as a user would:
// it bootstraps a node and is allowed its first request.
func TestEmbeddedExampleDecides(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "run", ".", "-bootstrap", "-raft", "127.0.0.1:0", "-http", "127.0.0.1:0", "-data", t.TempDir())
	cmd.Dir = "embedded"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./examples/embedded: %v\n%s", err, out)
	}
	if !containsLine(string(out), "allowed; 99 left") {
		t.Fatalf("the example did not report its decision:\n%s", out)
	}
}

// TestEmbeddedExampleWithoutAClusterSaysWhatToDo: a replica started
// without -bootstrap on an empty data directory belongs to no cluster; it
// says how to make one at once instead of waiting for a leader.
func TestEmbeddedExampleWithoutAClusterSaysWhatToDo(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "run", ".", "-raft", "127.0.0.1:0", "-http", "127.0.0.1:0", "-data", t.TempDir())
	cmd.Dir = "embedded"
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("go run ./examples/embedded without -bootstrap succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "belongs to no cluster yet: start the first replica with -bootstrap") {
		t.Fatalf("the example did not say what to do:\n%s", out)
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
// to reach (at a port the test holds and resets every connection to): its
// local limiter answers with this replica's share.
func TestGuardExampleFallsBackLocally(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "run", ".", testenv.HoldPort(t).Addr())
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
	skipIfSecure(t, c)
	addr := startExample(t, "middleware", "-secret", "s3cret", c.Nodes[0].HTTPAddr)

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
	if got := post(""); got != http.StatusUnauthorized {
		t.Fatalf("an export without a token: %d, want 401", got)
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
	printed, err := exec.Command(buildExample(t, "middleware"), "-secret", "s3cret", "-token-for", "carol").Output()
	if err != nil {
		t.Fatalf("-token-for: %v", err)
	}
	if got := post(strings.TrimSpace(string(printed))); got != http.StatusOK {
		t.Fatalf("the token -token-for printed: %d, want 200", got)
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
	skipIfSecure(t, c)
	addr := startExample(t, "grpclimit", c.Nodes[0].HTTPAddr)
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
	// Reflection, without a key and not limited, names the service.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %v, want grpc.health.v1.Health among them", names)
	}
}

// TestReportsExampleQueuesAndRefuses runs the report service against a
// three-node cluster: one client's fourth report at once is over its
// quota; then 30 clients at once, with 5 builders and a queue of 20: 25
// reports are built (never more than 5 at once, never more than 20
// waiting), and the other 5 are refused at once with Retry-After.
func TestReportsExampleQueuesAndRefuses(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	skipIfSecure(t, c)
	addr := startExample(t, "reports", "-build-time", "1s", c.Nodes[0].HTTPAddr, c.Nodes[1].HTTPAddr, c.Nodes[2].HTTPAddr)
	report := func(who string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/report", nil)
		if who != "" {
			req.Header.Set("X-Client-ID", who)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, ""
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if status, _ := report(""); status != http.StatusUnauthorized {
		t.Fatalf("a report without a client ID: %d, want 401", status)
	}

	// One client, four at once: its bucket holds a burst of 3.
	statuses := make(chan int, 4)
	for range 4 {
		go func() { s, _ := report("solo"); statuses <- s }()
	}
	counts := map[int]int{}
	for range 4 {
		counts[<-statuses]++
	}
	if counts[http.StatusOK] != 3 || counts[http.StatusTooManyRequests] != 1 {
		t.Fatalf("one client's four reports at once: %v, want 3 built and 1 over quota", counts)
	}

	// Thirty clients at once, while the builders and the queue are watched.
	watchDone := make(chan struct{})
	var mostHeld, mostWaiting int
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-watchDone:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var view struct {
				Leases  []json.RawMessage `json:"leases"`
				Waiting []json.RawMessage `json:"waiting"`
			}
			resp, err := http.Get(c.Nodes[1].URL() + "/v1/leases?key=reports:building")
			if err != nil {
				continue
			}
			_ = json.NewDecoder(resp.Body).Decode(&view)
			resp.Body.Close()
			mostHeld, mostWaiting = max(mostHeld, len(view.Leases)), max(mostWaiting, len(view.Waiting))
		}
	}()
	type answer struct {
		status     int
		retryAfter string
	}
	answers := make(chan answer, 30)
	for i := range 30 {
		go func() { s, ra := report(fmt.Sprintf("client-%d", i)); answers <- answer{s, ra} }()
	}
	counts = map[int]int{}
	for range 30 {
		a := <-answers
		counts[a.status]++
		if a.status == http.StatusServiceUnavailable && a.retryAfter == "" {
			t.Errorf("a refusal without Retry-After")
		}
	}
	close(watchDone)
	<-watched
	if counts[http.StatusOK] != 25 || counts[http.StatusServiceUnavailable] != 5 {
		t.Fatalf("thirty clients at once: %v, want 25 built and 5 refused", counts)
	}
	if mostHeld > 5 || mostWaiting > 20 {
		t.Fatalf("seen %d building and %d waiting at once, want at most 5 and 20", mostHeld, mostWaiting)
	}
}

// skipIfSecure skips a test of an example that talks plain HTTP, without a
// token, when the test clusters are secure (LIMITNODE_TEST_SECURE).
func skipIfSecure(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	c.WaitLeader()
	if strings.HasPrefix(c.Nodes[0].URL(), "https://") {
		t.Skip("LIMITNODE_TEST_SECURE: the example talks plain HTTP to the cluster, without a token")
	}
}

// buildExample builds the example program in directory name and returns
// its path.
func buildExample(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, "./"+name).CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/%s: %v\n%s", name, err, out)
	}
	return bin
}

// servingOn is the line a serving example logs, naming the address it
// listens on.
var servingOn = regexp.MustCompile(`serving (?:gRPC )?on (127\.0\.0\.1:\d+)`)

// startExample builds the example program in directory name, runs it with
// -listen 127.0.0.1:0 and args until the test ends, and returns the
// address it logs it serves on (the port the OS picked).
func startExample(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(buildExample(t, name), append([]string{"-listen", "127.0.0.1:0"}, args...)...)
	var logs testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	var serving []string
	testenv.WaitFor(t, "examples/"+name+" to say where it serves", func() bool {
		select {
		case <-exited:
			t.Fatalf("examples/%s exited:\n%s", name, logs.String())
		default:
		}
		serving = servingOn.FindStringSubmatch(logs.String())
		return serving != nil
	})
	return serving[1]
}

// TestTokensExampleChargesWhatItStreamed runs the streaming example
// against a test cluster: an answer of four tokens reserves 256 of the
// tenant's budget and, once settled, costs four.
func TestTokensExampleChargesWhatItStreamed(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	skipIfSecure(t, c)
	addr := startExample(t, "tokens", c.Nodes[0].HTTPAddr)
	get := func() (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/generate?prompt=hello+there+world", nil)
		req.Header.Set("X-Tenant", "acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		var body strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			body.WriteString(sc.Text() + " ")
		}
		return resp.StatusCode, body.String()
	}
	spent := time.Now()
	if status, body := get(); status != http.StatusOK || body != "hello there world done " {
		t.Fatalf("the answer: %d %q", status, body)
	}
	keyURL := c.Nodes[0].URL() + "/v1/keys/tokens:acme"
	// A bucket of 10,000 a day: 256 reserved, then settled at the 4 used;
	// a token refills every 8.64 s, which a slow settlement may find back.
	const refill = 8640 * time.Millisecond
	testenv.WaitFor(t, "the tenant's budget to be settled at 9,996 left (256 reserved, 4 used)", func() bool {
		var state struct {
			Limits []struct{ Remaining int64 } `json:"limits"`
		}
		resp, err := http.Get(keyURL)
		if err != nil {
			return false
		}
		_ = json.NewDecoder(resp.Body).Decode(&state)
		resp.Body.Close()
		refilled := int64(time.Since(spent) / refill)
		return len(state.Limits) == 1 && state.Limits[0].Remaining >= 10_000-4 && state.Limits[0].Remaining <= 10_000-4+refilled
	})
}
