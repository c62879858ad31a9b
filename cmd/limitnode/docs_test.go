package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/limitnode/limitnode/internal/testenv"
)

// The shell blocks of README.md and docs/*.md are what users paste, so the
// tests paste them too: each page's runnable blocks, in order, as one bash
// script (after the README's three-node cluster when the page talks to
// it), with the binary built from this tree. A block that cannot run here
// (it needs kubectl, docker, an hour) says so in the line before it:
//
//	<!-- not run: needs kubectl -->
//
// and TestEveryShellBlockRunsOrIsMarked holds every other block to a test.

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// shBlock is one ```sh block of a page.
type shBlock struct {
	page   string // relative to the repository's root
	line   int    // of the opening fence, from 1
	text   string // the block's lines, their common indentation removed
	notRun string // the reason of a "<!-- not run: ... -->" line before it
}

// notRunMark is the line that keeps the block after it out of the tests.
var notRunMark = regexp.MustCompile(`^<!-- not run: (.+) -->$`)

// docPages are the pages whose blocks users paste: README.md and docs/*.md.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// shBlocks returns the ```sh blocks of page, indented ones (in a list
// item) included.
func shBlocks(t *testing.T, page string) []shBlock {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var blocks []shBlock
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		indent := lines[i][:strings.Index(lines[i], "```")]
		b := shBlock{page: page, line: i + 1}
		for j := i - 1; j >= 0; j-- {
			if prev := strings.TrimSpace(lines[j]); prev != "" {
				if m := notRunMark.FindStringSubmatch(prev); m != nil {
					b.notRun = m[1]
				}
				break
			}
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		b.text = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, b)
	}
	return blocks
}

// runnable returns the blocks of page that are not marked "not run".
func runnable(t *testing.T, page string) []shBlock {
	t.Helper()
	var out []shBlock
	for _, b := range shBlocks(t, page) {
		if b.notRun == "" {
			out = append(out, b)
		}
	}
	return out
}

// buildLine is how a standalone script builds the binary; the tests build
// it from this tree once, in its place.
const buildLine = "go build -o limitnode ./cmd/limitnode"

// readmeCluster is the README's three-node cluster: the block that builds
// the binary and starts n3.
func readmeCluster(t *testing.T) shBlock {
	t.Helper()
	for _, b := range runnable(t, "README.md") {
		if strings.HasPrefix(b.text, buildLine+"\n") && strings.Contains(b.text, "-id n3 ") {
			return b
		}
	}
	t.Fatal("the README has no block that builds limitnode and starts n3")
	return shBlock{}
}

// goRunExample is how a page runs an example; the tests build each once.
var goRunExample = regexp.MustCompile(`go run \./examples/([a-z0-9_-]+)`)

// docScript is how the tests run the runnable blocks of one page.
type docScript struct {
	page string
	// onReadmeCluster: the page's blocks talk to the README's cluster,
	// whose block runs first.
	onReadmeCluster bool
	programs        []string // beside bash and go
	// want are strings the output must hold, each in order after the
	// previous one.
	want []string
	// check, when set, looks further at the output.
	check func(t *testing.T, out string)
}

// script is the bash script of the page's runnable blocks.
func (s docScript) script(t *testing.T) string {
	t.Helper()
	var blocks []shBlock
	if s.onReadmeCluster {
		blocks = append(blocks, readmeCluster(t))
	}
	for _, b := range runnable(t, s.page) {
		if s.page == "README.md" && (b.line == readmeSetup(t).line || b.line == readmeCluster(t).line) {
			continue // TestReadmeSetUpCommands runs it; the cluster is first
		}
		blocks = append(blocks, b)
	}
	if len(blocks) == 0 || !strings.HasPrefix(blocks[0].text, buildLine+"\n") {
		t.Fatalf("%s: the first block does not start with %q: a reader who starts on this page must build the binary first", s.page, buildLine)
	}
	var script strings.Builder
	for _, b := range blocks {
		fmt.Fprintf(&script, "# %s:%d\n%s", b.page, b.line, b.text)
	}
	return script.String()
}

// runScript runs script in a scratch directory, with the binary built from
// this tree in place of each build line and each example's program in place
// of its go run, and returns what it printed; the script must succeed.
//
// The pages' addresses are a user's: a cluster of theirs may run on them.
// So every 127.0.0.1 port the script names is moved to one the test picks
// (scriptAddr; the same for each mention), the defaults of a node and of
// the CLI (7070, 7071) are moved the same way through LIMITNODE_HTTP,
// LIMITNODE_RAFT and LIMITNODE_ADDR. Before it starts anything the test
// fails if the script still names a page's port in another form, and moves
// a page's port again if something answers on the port it picked (a
// program that picks ports the same way, but without the lock, may have
// taken it since): the script never talks to a process the test did not
// start.
func runScript(t *testing.T, what, script string) string {
	t.Helper()
	dir := t.TempDir()
	copyFile(t, buildBinary(t), filepath.Join(dir, "limitnode"))
	if err := os.Chmod(filepath.Join(dir, "limitnode"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, m := range goRunExample.FindAllStringSubmatch(script, -1) {
		if _, err := os.Stat(filepath.Join(dir, "examples", m[1])); err != nil {
			out := filepath.Join(dir, "examples", m[1])
			if msg, err := exec.Command("go", "build", "-o", out, "../../examples/"+m[1]).CombinedOutput(); err != nil {
				t.Fatalf("go build ./examples/%s: %v\n%s", m[1], err, msg)
			}
		}
	}
	script = strings.ReplaceAll(script, buildLine+"\n", "")
	script = goRunExample.ReplaceAllString(script, "examples/$1")
	script = strings.ReplaceAll(script, "go run ./cmd/limitnode", "./limitnode")
	ports := portMap{t: t, moved: map[string]string{}}
	ports.pickSilent(script)
	script = ports.rewrite(script)
	ports.mustNotRemain(what, script)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "trap 'set +e; kill -TERM $(jobs -p) 2>/dev/null; wait' EXIT\nset -e\n"+script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LIMITNODE_HTTP="+ports.addr("7070"), "LIMITNODE_RAFT="+ports.addr("7071"), "LIMITNODE_ADDR="+ports.addr("7070"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, ".config"), "XDG_DATA_HOME="+filepath.Join(dir, ".local"))
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	mustBeIgnored(t, what, dir)
	return string(out)
}

// mustBeIgnored fails the test when a page's script, run in dir as a
// reader runs it in a clone's root, left there something the clone's
// .gitignore does not cover: one git add -A would commit it, keys and
// tokens among them. What the test itself put there is left out: the
// binary, the examples it built and the XDG directories it named.
func mustBeIgnored(t *testing.T, what, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Log("git is not installed: what the script left is not checked against .gitignore")
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if slices.Contains([]string{"limitnode", "examples", ".config", ".local"}, name) {
			continue
		}
		if e.IsDir() {
			name += "/"
		}
		check := exec.Command("git", "check-ignore", "--no-index", "-q", name)
		check.Dir = repoRoot
		if err := check.Run(); err != nil {
			t.Errorf("%s leaves %s in the directory it runs in, which .gitignore does not cover (git check-ignore: %v): write it into a scratch directory, or ignore it", what, name, err)
		}
	}
}

// docPort is a port as the pages' scripts write it: after 127.0.0.1: or
// localhost: in an address, or as an Envoy port_value.
var docPort = regexp.MustCompile(`(127\.0\.0\.1:|localhost:|port_value: )(\d{2,5})\b`)

// anyPort is a port in an address written any other way: after a host
// name or address and a colon (n1:7070, [::1]:7070), or after a lone colon
// (:7070, every interface).
var anyPort = regexp.MustCompile(`(?:[A-Za-z0-9.\-\]]|^|\s):(\d{2,5})\b`)

// portMap moves a script's ports to ones the test picked, the same one for
// each mention of a port.
type portMap struct {
	t     *testing.T
	moved map[string]string // the page's port → the picked 127.0.0.1 address
}

func (p *portMap) addr(port string) string {
	if a, ok := p.moved[port]; ok {
		return a
	}
	a := scriptAddr(p.t)
	p.moved[port] = a
	return a
}

func (p *portMap) rewrite(script string) string {
	return docPort.ReplaceAllStringFunc(script, func(m string) string {
		sub := docPort.FindStringSubmatch(m)
		_, port, _ := net.SplitHostPort(p.addr(sub[2]))
		return sub[1] + port
	})
}

// mustNotRemain fails the test if the rewritten script still names one of
// the pages' ports in an address: a form the rewrite does not know, which
// would reach a process the test did not start.
func (p *portMap) mustNotRemain(what, script string) {
	if port, line, ok := unmovedPort(script, docPagePorts(p.t)); ok {
		p.t.Fatalf("%s names the page's port %s in a form the test cannot move (write 127.0.0.1:%s or localhost:%s): %s", what, port, port, port, line)
	}
}

// unmovedPort finds in script an address with one of pagePorts, and
// returns the port and the line it is on.
func unmovedPort(script string, pagePorts map[string]bool) (port, line string, ok bool) {
	for _, m := range anyPort.FindAllStringSubmatchIndex(script, -1) {
		if port := script[m[2]:m[3]]; pagePorts[port] {
			start := strings.LastIndex(script[:m[0]], "\n") + 1
			end := m[1] + strings.IndexByte(script[m[1]:]+"\n", '\n')
			return port, script[start:end], true
		}
	}
	return "", "", false
}

// pickSilent picks a port for each of the script's page ports and the
// defaults (7070, 7071, moved through LIMITNODE_*), and picks again one that
// something answers on.
func (p *portMap) pickSilent(script string) {
	for _, port := range []string{"7070", "7071"} {
		p.addr(port)
	}
	p.rewrite(script)
	for round := 0; ; round++ {
		busy := p.answering()
		if len(busy) == 0 {
			return
		}
		if round == 5 {
			p.t.Fatalf("something answers on every port picked for the page's ports %v: not running the script against it", busy)
		}
		for _, page := range busy {
			p.t.Logf("something answers on %s, picked for the page's port %s: picking another", p.moved[page], page)
			p.moved[page] = scriptAddr(p.t)
		}
	}
}

// answering returns the page ports whose picked port something answers on.
func (p *portMap) answering() []string {
	var busy []string
	for page, addr := range p.moved {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			busy = append(busy, page)
		}
	}
	return busy
}

// docPagePorts are the ports the pages name in their addresses, with the
// defaults 7070 and 7071. None may be one scriptAddr could pick, so that a
// picked port is never taken for a page's.
func docPagePorts(t *testing.T) map[string]bool {
	t.Helper()
	ports := map[string]bool{"7070": true, "7071": true}
	for _, page := range docPages(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docPort.FindAllStringSubmatch(string(data), -1) {
			if n, _ := strconv.Atoi(m[2]); n >= minScriptPort && n < ephemeralLow() {
				t.Fatalf("%s names port %s: the pages' ports stay out of %d-%d, where the doc scripts' own are", page, m[2], minScriptPort, ephemeralLow()-1)
			}
			ports[m[2]] = true
		}
	}
	return ports
}

// docScripts are the pages whose blocks run, and what their output must
// show.
var docScripts = []docScript{
	{
		page: "README.md", onReadmeCluster: true,
		want:  []string{`"self":"n3"`, "HTTP/1.1 200 OK", `"allowed":true,"limit":100,"remaining":99`},
		check: voters(3),
	},
	{
		page: "docs/http-api.md", onReadmeCluster: true,
		want: []string{`"field":"limit.rate"`, `did you mean \"cost\"`, "HTTP/1.1 200 OK", `{"allowed":true,"limit":100,"remaining":98,`, "429 Retry-After: ",
			`Limitnode-Denied-By: "default";check=0;cause=limit;algorithm=token_bucket;rate=2;period_ms=60000;burst=2`, `"denied_by":{"check":0,"limit":{"algorithm":"token_bucket","rate":2,"period":"1m0s","burst":2},"cause":"limit"}}`,
			"200 shared: \n200 shared: \n200 shared: true\n200 shared: true", `"wait_ms":`, `"held_ms":`,
			`"reserved":4000,"cost":1234,"refunded":2766,"charged":0}`, `"refunded":2766,"charged":0,"duplicate":true}`, `"code":"conflict","field":"settlement_id"}`,
			`"reserved":8000,"cost":12000,"refunded":0,"charged":3000,"forgiven":1000,"retry_after_ms":`, "\n429\n",
			`"checks":[{"key":"client:42"`, `"status":200`, `"field":"requests[1].policy"`, `"field":"requests[2].limit.rate"`,
			`"shadow_denied":0`, `{"deleted":"per-tenant-route"}`,
			`{"key":"api-key:spent","limits":[`, `{"reset":"api-key:spent","limits":1}`, "200\n",
			`{"key":"api-key:scraper","reason":"scraping the catalogue"`, `"allowed":false`, `"blocked":{"key":"api-key:scraper","reason":"scraping the catalogue","ends_in_ms":`,
			`{"blocks":[{"key":"api-key:scraper"`, `"ends_in_ms":0}`, `"action":"policy.put","subject":"audited","detail":"token_bucket 100 per 1m0s"}`, `"granted":false`, `"position":1`, `"expires_in_ms":300000`, `"released":`, `"waited_ms":`,
			`{"id":"n4"`, `{"removed":"n4"}`, `"leader":"n2"`, `{"status":"ok"}`, `{"status":"ready"}`, `"agrees":true`,
			"X-Limitnode-Limits-Digest: ", `"restored_index":`, "<title>limitnode n1</title>", `"top_denied_keys":[{"name":"api-key:busy"`,
			`limitnode_decisions_total{outcome="allowed"}`},
	},
	{
		page: "docs/proxies.md", onReadmeCluster: true, programs: []string{"caddy", "nginx"},
		want: []string{`"key_template":"ip:{ip}"`, "200 \n200 \n200 \n429 "},
	},
	{
		page: "docs/go.md", onReadmeCluster: true,
		want: []string{"allowed: true, remaining: 99", "the cluster could not decide", "allowed: true, remaining: 32", "admitted 1000 of 1000; most from the client's shares: true", "report for acme", "hello\nthere\ndone", `{"key":"tokens:acme","limits":[{"limit":{"algorithm":"token_bucket","rate":10000,"period":"24h0m0s","burst":10000},"remaining":9997`,
			"200 200 200 200 200 200 200 200 200 200 429", "401", "grpc.health.v1.Health", `"status": "SERVING"`, "ResourceExhausted", "call 6 refused",
			"allowed; 99 left", "belongs to no cluster yet", "exit status 1"},
	},
	{
		page: "docs/security.md", programs: []string{"caddy"},
		want: []string{`"allowed":true`, `"code":"unauthenticated"`, "n3", "<title>limitnode ", `"top_error_bound":`, "404\n", "401\n"},
	},
	{
		page: "docs/operations.md", onReadmeCluster: true,
		want: []string{"n1    n1", "allowed   2      1", "api   token_bucket 100/1m", "user:42  api", "REFUNDED", "380", "user:13  operator", "card testing", "policy.put", "api", "block.put", "RESTORED AT", "ready", "leader is now n2",
			// where a decision's time goes
			`limitnode_batch_wait_seconds_count{batcher="leader"}`, "404\n",
			// membership
			"removed n5", "not a member of the cluster", "joined n5", "does not answer as a limitnode node", `409 conflict (id): member "n5" is running at`,
			"removed n5", `409 conflict (id): removing "n2" would leave 2 of 4 voters answering`, `d6 belongs to node "n6", not "n9"`, "removed n6", "removed n7",
			// a restart, a recovery
			"waiting for a quorum of 2 of the 3 voters; not answering: n2 at", "api   token_bucket 100/1m", "recovered d1", "n1  leader", "api   token_bucket 100/1m"},
	},
	{
		page: "docs/algorithms.md", onReadmeCluster: true,
		want: []string{`{"allowed":true,"limit":100,"remaining":0`, `{"allowed":false`, `{"allowed":true`, `{"allowed":true,"limit":100,"remaining":0`, `{"allowed":false`},
	},
	{
		page: "docs/envoy.md",
		want: []string{"edge", "envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "x-limitnode-shared: true"},
		check: func(t *testing.T, out string) {
			if ok, over := strings.Count(out, `"overallCode": "OK"`), strings.Count(out, `"overallCode": "OVER_LIMIT"`); ok != 3 || over != 1 {
				t.Fatalf("%d OK and %d OVER_LIMIT, want 3 and 1:\n%s", ok, over, out)
			}
			// The changed file, put by the leader; the broken one, logged
			// with its line, changing nothing.
			for _, want := range []*regexp.Regexp{regexp.MustCompile(`rls-config +rls\.put +edge`),
				regexp.MustCompile(`level=ERROR msg="-rls-config is invalid: .*edge\.yaml: descriptors\[0\]\.rate_limit\.unit: line 4: unknown unit`),
				regexp.MustCompile(`(?m)^2$`)} {
				if !want.MatchString(out) {
					t.Fatalf("the output does not match %s:\n%s", want, out)
				}
			}
		},
	},
}

// voters checks that n3's first view of the cluster (/v1/cluster) in the
// output lists n voters.
func voters(n int) func(t *testing.T, out string) {
	return func(t *testing.T, out string) {
		t.Helper()
		_, view, _ := strings.Cut(out, `{"self":"n3"`)
		view, _, _ = strings.Cut(view, "\n")
		if got := strings.Count(view, `"voter":true`); got != n {
			t.Fatalf("n3's view of the cluster lists %d voters, want %d:\n%s", got, n, out)
		}
	}
}

// TestDocScripts runs each page's runnable blocks.
func TestDocScripts(t *testing.T) {
	for _, s := range docScripts {
		t.Run(strings.TrimSuffix(filepath.Base(s.page), ".md"), func(t *testing.T) {
			t.Parallel()
			testenv.NeedPrograms(t, append([]string{"bash", "curl", "go"}, s.programs...)...)
			out := runScript(t, s.page, s.script(t))
			t.Logf("%s printed:\n%s", s.page, out)
			rest := withoutNodeLogs(out)
			for _, want := range s.want {
				_, after, ok := strings.Cut(rest, want)
				if !ok {
					t.Fatalf("%s: the output lacks %q (after the previous expectations):\n%s", s.page, want, out)
				}
				rest = after
			}
			if s.check != nil {
				s.check(t, out)
			}
		})
	}
}

// withoutNodeLogs is a script's output without the log lines of the nodes
// it started in the background (slog's text, "time=..."), which land in
// the output whenever a node has something to say, even between the lines
// of one command's answer.
func withoutNodeLogs(out string) string {
	lines := strings.Split(out, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(l, "time=") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

// readmeSetup is the README's first block: the two set-up commands.
func readmeSetup(t *testing.T) shBlock {
	t.Helper()
	blocks := shBlocks(t, "README.md")
	if len(blocks) == 0 || blocks[0].line != 3 {
		t.Fatal("the README does not open (right under its title) with a block of set-up commands")
	}
	return blocks[0]
}

// TestReadmeSetUpCommands: the README opens with exactly two commands, one
// that runs a working single node with no flags, which this test runs, and
// one that runs the tests, which must be what CI runs.
func TestReadmeSetUpCommands(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "bash", "curl", "go")
	lines := strings.Split(strings.TrimSuffix(readmeSetup(t).text, "\n"), "\n")
	command := func(line string) string { c, _, _ := strings.Cut(line, "#"); return strings.TrimSpace(c) }
	if len(lines) != 2 || command(lines[0]) != "go run ./cmd/limitnode" || command(lines[1]) != "go test -race ./..." {
		t.Fatalf("the README's set-up block is not the two commands go run ./cmd/limitnode and go test -race ./...:\n%s", strings.Join(lines, "\n"))
	}
	ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^go test -race( -\S+)* \./\.\.\.$`).Match(ci) {
		t.Fatal(".ci/run does not run go test -race ./..., the README's test command")
	}
	out := runScript(t, "the README's first command", buildLine+"\n"+command(lines[0])+` &
until curl -sf 127.0.0.1:7070/readyz >/dev/null; do kill -0 $! || exit 1; sleep 0.2; done
curl -s -d '{"key":"k","limit":{"rate":1,"period":"1m"}}' 127.0.0.1:7070/v1/allow
test -f limitnode-data/raft.db
`)
	if !strings.Contains(out, `"allowed":true`) {
		t.Fatalf("the single node did not decide:\n%s", out)
	}
}

// TestEveryShellBlockRunsOrIsMarked: every sh block of the README and of
// docs/ is run by TestDocScripts (its page has a script), is the README's
// set-up block, or says in a "<!-- not run: ... -->" line why not.
func TestEveryShellBlockRunsOrIsMarked(t *testing.T) {
	t.Parallel()
	scripted := map[string]bool{}
	for _, s := range docScripts {
		if scripted[s.page] {
			t.Errorf("%s has two scripts", s.page)
		}
		scripted[s.page] = true
		if len(runnable(t, s.page)) == 0 {
			t.Errorf("%s has a script but no block to run", s.page)
		}
	}
	setup := readmeSetup(t)
	for _, page := range docPages(t) {
		for _, b := range shBlocks(t, page) {
			switch {
			case b.notRun != "", page == setup.page && b.line == setup.line:
			case !scripted[page]:
				t.Errorf("%s:%d: an sh block no test runs: add the page to docScripts, or mark the block <!-- not run: why -->", page, b.line)
			}
		}
	}
	if !slices.Contains(docPages(t), "docs/http-api.md") {
		t.Error("docs/http-api.md is missing")
	}
}

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// anchorOf is GitHub's anchor for a heading: lower case, punctuation
// dropped, spaces as hyphens.
func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown page's headings.
func anchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if h := strings.TrimLeft(line, "#"); !fenced && h != line && strings.HasPrefix(h, " ") {
			out[anchorOf(strings.TrimSpace(h))] = true
		}
	}
	return out
}

// TestDocLinksResolve: every relative link of the README and docs/ names a
// file of the repository, and every #anchor a heading of its page.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	for _, page := range docPages(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), file)))
			}
			if _, err := os.Stat(filepath.Join(repoRoot, path)); err != nil {
				t.Errorf("%s: the link %s names no file of the repository", page, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[anchor] {
				t.Errorf("%s: the link %s names no heading of %s", page, target, path)
			}
		}
	}
}

// TestAScriptNamingAPagePortAnotherWayIsCaught: after the rewrite, an
// address with a page's port in a form the rewrite does not move is found;
// a port the rewrite moved, or a number that is no address, is not.
func TestAScriptNamingAPagePortAnotherWayIsCaught(t *testing.T) {
	t.Parallel()
	pagePorts := map[string]bool{"7001": true, "8005": true}
	tests := []struct {
		script string
		want   string // the port found, or ""
	}{
		{"curl -s n1:7001/readyz\n", "7001"},
		{"./limitnode -http :7001 -raft 127.0.0.1:24567\n", "7001"},
		{"curl -s '[::1]:8005/v1/cluster'\n", "8005"},
		{"curl -s 127.0.0.1:24567/readyz   # moved from 7001\n", ""},
		{`curl -s -d '{"cost":8005}' 127.0.0.1:24567/v1/allow` + "\n", ""},
		{"echo n5 still runs at 8005\n", ""},
	}
	for _, tt := range tests {
		port, line, ok := unmovedPort(tt.script, pagePorts)
		if port != tt.want || ok != (tt.want != "") || (ok && line != strings.TrimSuffix(tt.script, "\n")) {
			t.Errorf("%q: found %q on %q (%v), want %q", tt.script, port, line, ok, tt.want)
		}
	}
}

// TestAPickedPortSomethingAnswersOnIsPickedAgain: a port picked for a
// script that something answers on by the time the script would start is
// replaced before the script runs.
func TestAPickedPortSomethingAnswersOnIsPickedAgain(t *testing.T) {
	t.Parallel()
	stranger, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	ports := portMap{t: t, moved: map[string]string{"7001": stranger.Addr().String()}}
	ports.pickSilent("curl -s 127.0.0.1:7001/readyz\n")
	if got := ports.moved["7001"]; got == stranger.Addr().String() || ports.answering() != nil {
		t.Fatalf("the page's port 7001 is moved to %s, where something answers (%v)", got, ports.answering())
	}
	if got := ports.rewrite("curl -s 127.0.0.1:7001/readyz"); strings.Contains(got, stranger.Addr().String()) {
		t.Fatalf("the script still goes to the stranger: %s", got)
	}
}
