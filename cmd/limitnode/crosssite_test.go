package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
)

// A web page on another origin, open in a browser on a machine that reaches
// a node, must not change the cluster: these tests load such pages in
// headless Chromium against a three-node cluster in its no-flags setup.

// crossSitePage is a page that tries every write a browser can send to the
// node at node without the node's consent (a CORS preflight, which
// limitnode never grants), and writes "done" into #done once each has been
// sent. backup is a backup file of an empty cluster: restoring it would
// wipe every policy. With gets, the page also asks /v1/forward-auth with
// GET, from fetch and from an image.
func crossSitePage(node string, backup []byte, gets bool) string {
	limit := `limit:{rate:1,period:"1h"}`
	forwardAuthGets := ""
	if gets {
		forwardAuthGets = `
  () => send("/v1/forward-auth?policy=per-ip&dim.ip=client_ip"),
  () => image("/v1/forward-auth?policy=per-ip&dim.ip=client_ip"),`
	}
	return `<!doctype html><html><body><p id="done">running</p>
<iframe name="sink" style="display:none"></iframe>
<form id="form" method="post" enctype="text/plain" target="sink" action="` + node + `/v1/allow">
<input name='{"key":"victim-form","limit":{"rate":1,"period":"1h"},"request_id":"' value='"}'>
</form>
<script>
const node = "` + node + `";
const json = (v) => JSON.stringify(v);
const send = (path, init) => fetch(node + path, Object.assign({mode: "no-cors"}, init));
const post = (path, body, type) => send(path, {method: "POST", body, headers: type ? {"Content-Type": type} : {}});
const backup = Uint8Array.from(atob("` + base64.StdEncoding.EncodeToString(backup) + `"), (c) => c.charCodeAt(0));
const image = (path) => new Promise((done) => { const i = new Image(); i.onload = i.onerror = done; i.src = node + path; });
const attacks = [
  () => post("/v1/allow", json({key: "victim-text", ` + limit + `}), "text/plain"),
  () => post("/v1/allow", json({key: "victim-urlencoded", ` + limit + `}), "application/x-www-form-urlencoded"),
  () => post("/v1/allow", new Blob([json({key: "victim-untyped", ` + limit + `})])),
  () => post("/v1/allow/batch", json({requests: [{key: "victim-batch", ` + limit + `}]}), "text/plain"),
  () => navigator.sendBeacon(node + "/v1/allow", json({key: "victim-beacon", ` + limit + `})),
  () => post("/v1/leases", json({key: "victim-lease", max: 1, ttl: "1h"}), "text/plain"),
  () => post("/v1/snapshot", new Blob([backup])),
  () => post("/v1/snapshot", new Blob([backup]), "text/plain"),
  () => fetch(node + "/v1/policies/keep-me", {method: "DELETE"}),
  () => fetch(node + "/v1/keys/victim-text", {method: "DELETE"}),
  () => send("/v1/forward-auth?policy=per-ip&dim.ip=client_ip", {method: "POST"}),` + forwardAuthGets + `
  () => post("/v1/cluster/join", json({id: "n9", raft_addr: "127.0.0.1:9", http_addr: "127.0.0.1:9"}), "text/plain"),
  () => fetch(node + "/v1/cluster/nodes/n3", {method: "DELETE"}),
  () => post("/v1/cluster/transfer-leadership"),
  () => post("/v1/cluster/transfer-leadership", json({to: "n2"}), "text/plain"),
];
(async () => {
  document.getElementById("form").submit();
  const results = [];
  for (const attack of attacks) {
    try { await attack(); results.push("sent"); } catch (e) { results.push("refused by the browser"); }
  }
  await new Promise((r) => setTimeout(r, 500)); // the form and the beacon
  document.getElementById("done").textContent = "done: " + results.join(", ");
})();
</script></body></html>`
}

// chromiumLoad loads url in headless Chromium until its scripts have run and
// returns the DOM; args are more of Chromium's flags.
func chromiumLoad(t *testing.T, url string, args ...string) string {
	t.Helper()
	testenv.NeedPrograms(t, "chromium")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=30000", "--dump-dom"}, args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "chromium", append(args, url)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
	}
	return stdout.String()
}

// serveOn serves h on a listener of its own at 127.0.0.1 until the test
// ends, and returns its port.
func serveOn(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// clusterState is what a cross-site page must not change.
type clusterState struct {
	Leader   string
	Members  []string
	Policies []string
	Keys     []string
	Leases   int
}

func stateOf(t *testing.T, ctx context.Context, addr string) clusterState {
	t.Helper()
	c := client.New(nil, addr)
	var s clusterState
	st, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Leader = st.Leader
	for _, n := range st.Nodes {
		s.Members = append(s.Members, n.ID)
	}
	slices.Sort(s.Members)
	page, err := c.ListPolicies(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range page.Policies {
		s.Policies = append(s.Policies, p.Name)
	}
	keys, err := c.Keys(ctx, "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys.Keys {
		s.Keys = append(s.Keys, k.Key)
	}
	resp, err := http.Get("http://" + addr + "/v1/leases?key=victim-lease")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var leases struct{ Leases []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&leases); err != nil {
		t.Fatal(err)
	}
	s.Leases = len(leases.Leases)
	return s
}

// answers counts the node's answers per route and status class ("2xx",
// "403", ...), from its /metrics.
func answers(t *testing.T, addr string) map[string]map[string]int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "limitnode_http_requests_total{") {
			continue
		}
		_, route, _ := strings.Cut(line, `route="`)
		route, _, _ = strings.Cut(route, `"`)
		_, code, _ := strings.Cut(line, `code="`)
		code, _, _ = strings.Cut(code, `"`)
		if strings.HasPrefix(code, "2") {
			code = "2xx"
		}
		var n int
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &n); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		if out[route] == nil {
			out[route] = map[string]int{}
		}
		out[route][code] += n
	}
	return out
}

// mustRefuseEvery fails the test unless each route answered the page
// (between before and after) with 403 at least once and never with a 2xx.
func mustRefuseEvery(t *testing.T, before, after map[string]map[string]int, routes ...string) {
	t.Helper()
	for _, route := range routes {
		if n := after[route]["2xx"] - before[route]["2xx"]; n > 0 {
			t.Errorf("%s answered the page's requests with a 2xx %d times", route, n)
		}
		if after[route]["403"] == before[route]["403"] {
			t.Errorf("%s refused none of the page's requests with 403: did they reach the node? (%v)", route, after[route])
		}
	}
}

// startDefaultCluster starts three nodes with no flags but their addresses
// and returns the leader's HTTP address once all three are members (n1
// bootstraps, but an election on a loaded machine may have moved the lead).
func startDefaultCluster(t *testing.T, ctx context.Context) string {
	t.Helper()
	node := func(id, join string) []string {
		args := []string{"-id", id, "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir()}
		if join != "" {
			args = append(args, "-join", join)
		}
		return args
	}
	n1 := startNode(t, ctx, node("n1", ""), nil)
	startNode(t, ctx, node("n2", n1.addr), nil)
	startNode(t, ctx, node("n3", n1.addr), nil)
	leader := ""
	testenv.WaitFor(t, "the three nodes to form one cluster", func() bool {
		st, err := client.New(nil, n1.addr).Cluster(ctx)
		for _, n := range st.Nodes {
			if err == nil && len(st.Nodes) == 3 && n.ID == st.Leader {
				leader = n.HTTPAddr
			}
		}
		return leader != ""
	})
	return leader
}

// TestACrossSitePageCannotChangeTheCluster loads a page that tries every
// write a browser sends without a preflight (fetch in no-cors mode with
// text/plain, form-urlencoded and untyped bodies, a text/plain form, a
// beacon, an image) and those it needs one for, against the leader of a
// cluster in the no-flags setup: from another site (localhost against
// 127.0.0.1) and from the same site on another port. Afterwards no key was
// spent, no lease taken, no policy deleted or restored away, no member
// added or removed; the node's /metrics show that the page's requests
// reached it and were refused, and that none of them (a transfer of
// leadership among them) was answered with a 2xx.
func TestACrossSitePageCannotChangeTheCluster(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "chromium")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leader := startDefaultCluster(t, ctx)
	c := client.New(nil, leader)
	var empty bytes.Buffer
	if _, err := c.Backup(ctx, &empty); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keep-me", "per-ip"} {
		if _, err := c.PutPolicy(ctx, name, client.Policy{Limit: &client.Limit{Rate: 1, Period: time.Hour}, KeyTemplate: "ip:{ip}"}); err != nil {
			t.Fatal(err)
		}
	}
	before := stateOf(t, ctx, leader)

	page := crossSitePage("http://"+leader, empty.Bytes(), true)
	port := serveOn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, page) }))
	for _, origin := range []string{"http://localhost:" + port, "http://127.0.0.1:" + port} {
		counted := answers(t, leader)
		dom := chromiumLoad(t, origin+"/")
		if !strings.Contains(dom, "done: sent") {
			t.Fatalf("the page from %s did not finish its attacks:\n%s", origin, dom)
		}
		mustRefuseEvery(t, counted, answers(t, leader),
			"/v1/allow", "/v1/allow/batch", "/v1/leases", "/v1/snapshot", "/v1/forward-auth", "/v1/cluster/join", "/v1/cluster/transfer-leadership")
		if after := stateOf(t, ctx, leader); !equalStates(before, after) {
			t.Fatalf("a page from %s changed the cluster:\nbefore %+v\nafter  %+v", origin, before, after)
		}
	}
}

// equalStates compares what a page could change but the leader: an
// election on a loaded machine may move it, so the page's transfers are
// checked in the node's metrics instead (none answered with a 2xx).
func equalStates(a, b clusterState) bool {
	return slices.Equal(a.Members, b.Members) && slices.Equal(a.Policies, b.Policies) &&
		slices.Equal(a.Keys, b.Keys) && a.Leases == b.Leases
}

// TestARebindingPageCannotChangeTheCluster loads a page from a name of the
// attacker's that resolves to the node's own address, as DNS rebinding
// makes it do: to the browser the node is then the page's own origin, so its
// requests are same-origin and may carry any Content-Type. A proxy that
// serves the page and passes everything else to the leader, Host and all,
// stands in for the rebound name. Its writes are refused all the same (the
// node is named by a host name, not by its address), and nothing changes:
// its GETs of /v1/forward-auth too, which over plain HTTP to a name carry
// neither Sec-Fetch-Site nor Origin, since a node without tokens answers
// nothing under a name (TestARebindingPageReadsNothing reads the rest).
func TestARebindingPageCannotChangeTheCluster(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "chromium")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leader := startDefaultCluster(t, ctx)
	c := client.New(nil, leader)
	var empty bytes.Buffer
	if _, err := c.Backup(ctx, &empty); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keep-me", "per-ip"} {
		if _, err := c.PutPolicy(ctx, name, client.Policy{Limit: &client.Limit{Rate: 1, Period: time.Hour}, KeyTemplate: "ip:{ip}"}); err != nil {
			t.Fatal(err)
		}
	}
	before := stateOf(t, ctx, leader)

	target, _ := url.Parse("http://" + leader)
	// The browser talks to the node itself: its Host, and no X-Forwarded-For.
	toNode := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
	}}
	var page string
	port := serveOn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/attack.html" {
			_, _ = io.WriteString(w, page)
			return
		}
		toNode.ServeHTTP(w, r)
	}))
	origin := "http://rebound.example:" + port
	page = strings.ReplaceAll(crossSitePage(origin, empty.Bytes(), true), `mode: "no-cors"`, `mode: "same-origin"`)
	page = strings.ReplaceAll(page, `"text/plain"`, `"application/json"`)
	counted := answers(t, leader)
	dom := chromiumLoad(t, origin+"/attack.html", "--host-resolver-rules=MAP rebound.example 127.0.0.1")
	if !strings.Contains(dom, "done: sent") {
		t.Fatalf("the page did not finish its attacks:\n%s", dom)
	}
	mustRefuseEvery(t, counted, answers(t, leader), "/v1/allow", "/v1/allow/batch", "/v1/leases", "/v1/snapshot", "/v1/policies/{name}",
		"/v1/keys/{key}", "/v1/forward-auth", "/v1/cluster/join", "/v1/cluster/nodes/{id}", "/v1/cluster/transfer-leadership")
	if after := stateOf(t, ctx, leader); !equalStates(before, after) {
		t.Fatalf("a rebinding page changed the cluster:\nbefore %+v\nafter  %+v", before, after)
	}
}
