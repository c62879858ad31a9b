package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
)

// rebindReadPage fetches each of paths from its own origin, as a page
// under a name rebound to a node can, and writes into #done, one line per
// path, "path status secret" where secret says whether the answer's body
// held marker.
func rebindReadPage(paths []string, marker string) string {
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = `"` + p + `"`
	}
	return `<!doctype html><html><body><pre id="done">running</pre>
<script>
const paths = [` + strings.Join(quoted, ", ") + `];
(async () => {
  const lines = [];
  for (const path of paths) {
    try {
      // Same-origin, so the page may add any header: a proxy's too.
      const r = await fetch(path, {headers: {"X-Forwarded-For": "203.0.113.7"}});
      const body = await r.text();
      lines.push(path + " " + r.status + " " + (body.includes("` + marker + `") ? "secret" : "-"));
    } catch (e) {
      lines.push(path + " failed -");
    }
  }
  document.getElementById("done").textContent = "done\n" + lines.join("\n");
})();
</script></body></html>`
}

// TestARebindingPageReadsNothing loads, in headless Chromium, a page from a
// name of the attacker's that resolves to the leader of a cluster in the
// no-flags setup (DNS rebinding: a proxy that serves the page and passes
// everything else to the node, Host and all, stands in for the rebound
// name). To the browser the node is the page's own origin, so the page may
// read whatever the node answers: it asks every GET route, the backup
// among them, adding a proxy's header. Each is a 403 but /healthz and
// /readyz, and no answer holds the name of the key the cluster keeps.
func TestARebindingPageReadsNothing(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "chromium")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leader := startDefaultCluster(t, ctx)
	const secret = "api-key-sk-live-4242"
	c := client.New(nil, leader)
	if _, err := c.PutPolicy(ctx, "per-ip", client.Policy{Limit: &client.Limit{Rate: 5, Period: time.Hour}, KeyTemplate: "ip:{ip}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Allow(ctx, client.AllowRequest{Key: secret, Limit: &client.Limit{Rate: 5, Period: time.Hour}}); err != nil {
		t.Fatal(err)
	}

	target, _ := url.Parse("http://" + leader)
	toNode := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
	}}
	paths := []string{"/v1/snapshot", "/v1/keys", "/v1/keys/" + secret, "/v1/policies", "/v1/cluster", "/metrics", "/v1/stats", "/",
		"/v1/audit", "/v1/blocks", "/v1/leases?key=" + secret, "/v1/rls/domains", "/v1/openapi.json",
		"/v1/forward-auth?policy=per-ip&dim.ip=client_ip", "/healthz", "/readyz"}
	page := rebindReadPage(paths, secret)
	port := serveOn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/read.html" {
			_, _ = io.WriteString(w, page)
			return
		}
		toNode.ServeHTTP(w, r)
	}))
	dom := chromiumLoad(t, "http://rebound.example:"+port+"/read.html", "--host-resolver-rules=MAP rebound.example 127.0.0.1")
	done := regexp.MustCompile(`(?s)<pre id="done">done\n(.*?)</pre>`).FindStringSubmatch(dom)
	if done == nil {
		t.Fatalf("the page did not finish its reads:\n%s", dom)
	}
	lines := strings.Split(strings.TrimSpace(done[1]), "\n")
	if len(lines) != len(paths) {
		t.Fatalf("%d answers for %d paths:\n%s", len(lines), len(paths), done[1])
	}
	for i, line := range lines {
		path := strings.ReplaceAll(paths[i], "&", "&amp;")
		want := path + " 403 -"
		if paths[i] == "/healthz" || paths[i] == "/readyz" {
			want = path + " 200 -"
		}
		if line != want {
			t.Errorf("the rebound page read %q, want %q", line, want)
		}
	}
}
