package httpapi

import (
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/internal/testenv"
)

// realCluster is what TestOpenAPIValidatesRealTraffic talks to: n1, a real
// node bootstrapped alone and served by the handler under test, and n2 and
// n3, real nodes its steps join, so that the membership routes change a
// real configuration.
type realCluster struct {
	n1, n2, n3 *cluster.Node
}

// openRealNode opens a node on a loopback port of its own, closed when the
// test ends. A request waits at most timeout for a leader.
func openRealNode(t *testing.T, id string, bootstrap bool, timeout time.Duration) *cluster.Node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := cluster.Open(cluster.Config{ID: id, RaftListener: ln, DataDir: t.TempDir(), Bootstrap: bootstrap,
		RequestTimeout: timeout, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// stopTheOtherVoter closes n2, the one voter besides n1 by then: n1 is
// left without a quorum, so without a leader.
func stopTheOtherVoter(t *testing.T, c *realCluster) {
	if err := c.n2.Close(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "n1 to lose its leader", func() bool { return !c.n1.IsLeader() })
}

// capturedFrom names what later steps of TestOpenAPIValidatesRealTraffic
// use from an earlier step's answer ({name} in their path or body): a
// lease's ID, the settlement IDs, a share's ID, a backup file.
var capturedFrom = map[string]func(body []byte) (name, value string){
	"a lease": func(b []byte) (string, string) { return "lease", answerField(b, "id") },
	"a reservation to settle": func(b []byte) (string, string) {
		return "settle1", answerField(b, "settlement_id")
	},
	"a reservation to settle in a batch": func(b []byte) (string, string) {
		var out struct {
			Responses []struct {
				SettlementID string `json:"settlement_id"`
			} `json:"responses"`
		}
		_ = json.Unmarshal(b, &out)
		if len(out.Responses) == 0 {
			return "settle2", ""
		}
		return "settle2", out.Responses[0].SettlementID
	},
	"take a share": func(b []byte) (string, string) {
		var out struct {
			Share struct{ ID string } `json:"share"`
		}
		_ = json.Unmarshal(b, &out)
		return "share", out.Share.ID
	},
	"a backup": func(b []byte) (string, string) { return "backup", string(b) },
}

// answerField is the string field name of the JSON object b, or "".
func answerField(b []byte, name string) string {
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	s, _ := out[name].(string)
	return s
}

// TestOpenAPIValidatesRealTraffic drives every documented operation
// through the handler in front of a real node, and checks each exchange
// against api/openapi.yaml: each answer is what a real cluster says, not
// what a fake says it would. The steps build on each other (a lease, then
// its renewal; joins, a hand-over, then a restore on the node that
// followed). The answers a real node cannot be made to give (a bug, an
// unknown outcome) are TestOpenAPIValidatesInjectedFailures'.
func TestOpenAPIValidatesRealTraffic(t *testing.T) {
	t.Parallel()
	spec := openAPI(t)
	c := &realCluster{n1: openRealNode(t, "n1", true, 2*time.Second), n2: openRealNode(t, "n2", false, 2*time.Second),
		n3: openRealNode(t, "n3", false, 2*time.Second)}
	testenv.WaitFor(t, "n1 to lead", c.n1.IsLeader)
	h := New(c.n1, Options{Logger: slog.New(slog.DiscardHandler), Jitter: func(n int64) int64 { return n }})
	vars := map[string]string{"n2": c.n2.RaftAddr(), "n3": c.n3.RaftAddr()}
	fill := func(s string) string {
		for name, value := range vars {
			s = strings.ReplaceAll(s, "{"+name+"}", value)
		}
		return s
	}

	const limit2PerMinute = `{"key":"k","limit":{"rate":2,"period":"1m"},"request_id":"r-1"}`
	steps := []struct {
		name               string
		before             func(*testing.T, *realCluster)
		method, path, body string
		want               int
	}{
		{"allowed", nil, "POST", "/v1/allow", `{"key":"k","limit":{"rate":2,"period":"1m"}}`, 200},
		{"allowed with every limit field", nil, "POST", "/v1/allow", `{"key":"k2","limit":{"algorithm":"gcra","rate":5,"period":"1s","burst":2},"cost":2,"request_id":"r-2"}`, 200},
		{"a reservation", nil, "POST", "/v1/allow", `{"key":"r","limit":{"algorithm":"gcra","rate":1,"period":"1s","burst":1},"cost":1}`, 200},
		{"a reservation within max_wait", nil, "POST", "/v1/allow", `{"key":"r","limit":{"algorithm":"gcra","rate":1,"period":"1s","burst":1},"max_wait":"2s"}`, 200},
		{"a reservation held", nil, "POST", "/v1/allow", `{"key":"r2","limit":{"rate":1000,"period":"1s","burst":1},"max_wait":"50ms","hold":true}`, 200},
		{"a hold's first call", nil, "POST", "/v1/allow", `{"key":"r3","limit":{"algorithm":"gcra","rate":1,"period":"50s","burst":1},"max_wait":"55s","hold":true}`, 200},
		{"a hold further away than the node holds is denied", nil, "POST", "/v1/allow", `{"key":"r3","limit":{"algorithm":"gcra","rate":1,"period":"50s","burst":1},"max_wait":"55s","hold":true}`, 429},
		{"max_wait on a window", nil, "POST", "/v1/allow", `{"key":"w","limit":{"algorithm":"fixed_window","rate":1},"max_wait":"1s"}`, 400},
		{"allowed, a window", nil, "POST", "/v1/allow", `{"key":"k3","limit":{"algorithm":"sliding_window_log","rate":10000,"period":"1h"},"cost":0}`, 200},
		{"allowed, the last unit", nil, "POST", "/v1/allow", limit2PerMinute, 200},
		{"a retry of the last unit, charged once", nil, "POST", "/v1/allow", limit2PerMinute, 200},
		{"denied", nil, "POST", "/v1/allow", `{"key":"k","limit":{"rate":2,"period":"1m"},"request_id":"r-1b"}`, 429},
		{"several checks", nil, "POST", "/v1/allow", `{"checks":[{"key":"client:a","limit":{"rate":10}},{"key":"global","limit":{"rate":2,"period":"1m"},"cost":2}],"request_id":"r-3"}`, 200},
		{"several checks, denied", nil, "POST", "/v1/allow", `{"checks":[{"key":"client:a","limit":{"rate":10}},{"key":"global","limit":{"rate":2,"period":"1m"}}]}`, 429},
		{"allowed at the design's path", nil, "POST", "/allow", `{"key":"design","limit":{"rate":1,"period":"1m"}}`, 200},
		{"denied at the design's path", nil, "POST", "/allow", `{"key":"design","limit":{"rate":1,"period":"1m"}}`, 429},
		{"a bad body at the design's path", nil, "POST", "/allow", `{"key":"design","limit":{"rate":0}}`, 400},
		{"put a policy", nil, "PUT", "/v1/policies/per-user", `{"limit":{"rate":100,"period":"1m"},"overrides":{"vip":{"algorithm":"fixed_window","rate":1000,"period":"1m"}},"key_template":"{user}","shadow":false}`, 200},
		{"put a policy with a penalty", nil, "PUT", "/v1/policies/login", `{"limit":{"rate":5,"period":"1m"},"penalty":{"denials":20,"within":"1m","block_for":"10m"}}`, 200},
		{"put a policy with a penalty of no window", nil, "PUT", "/v1/policies/login", `{"limit":{"rate":5,"period":"1m"},"penalty":{"denials":20,"within":"","block_for":"10m"}}`, 400},
		{"put a policy naming itself", nil, "PUT", "/v1/policies/trial", `{"name":"trial","limit":{"rate":1,"period":"1h"},"shadow":true}`, 200},
		{"get a policy", nil, "GET", "/v1/policies/per-user", "", 200},
		{"get a policy with a penalty", nil, "GET", "/v1/policies/login", "", 200},
		{"list policies", nil, "GET", "/v1/policies", "", 200},
		{"allow by policy and key", nil, "POST", "/v1/allow", `{"policy":"login","key":"u1","cost":3}`, 200},
		{"a key for a policy that builds its own", nil, "POST", "/v1/allow", `{"policy":"per-user","key":"u1"}`, 400},
		{"allow by policy and dimensions", nil, "POST", "/v1/allow", `{"policy":"per-user","dimensions":{"user":"u2"}}`, 200},
		{"forward-auth by method", nil, "GET", "/v1/forward-auth?policy=per-user&dim.user=method", "", 200},
		{"forward-auth by client address", nil, "POST", "/v1/forward-auth?policy=per-user&dim.user=client_ip", "", 200},
		{"forward-auth by host", nil, "PUT", "/v1/forward-auth?policy=per-user&dim.user=host", "", 200},
		{"put a policy keyed by a header", nil, "PUT", "/v1/policies/per-route", `{"limit":{"rate":100,"period":"1m"},"key_template":"route:{route}"}`, 200},
		{"forward-auth by a header, missing: one shared bucket", nil, "PATCH", "/v1/forward-auth?policy=per-route&dim.route=header:X-Route", "", 200},
		{"forward-auth by the Host header", nil, "PATCH", "/v1/forward-auth?policy=per-user&dim.user=header:Host", "", 400},
		{"forward-auth by a header Go strips", nil, "PATCH", "/v1/forward-auth?policy=per-user&dim.user=header:transfer-encoding", "", 400},
		{"forward-auth with its request ID from Host", nil, "GET", "/v1/forward-auth?policy=per-route&dim.route=method&request_id=header:Host", "", 400},
		{"forward-auth spending all", nil, "DELETE", "/v1/forward-auth?policy=per-user&dim.user=method&cost=100", "", 200},
		{"forward-auth of another method's key", nil, "OPTIONS", "/v1/forward-auth?policy=per-user&dim.user=method", "", 200},
		{"forward-auth denied for nginx", nil, "DELETE", "/v1/forward-auth?policy=per-user&dim.user=method&deny_status=403", "", 403},
		{"forward-auth denied by default", nil, "DELETE", "/v1/forward-auth?policy=per-user&dim.user=method", "", 429},
		{"forward-auth with an unknown source", nil, "GET", "/v1/forward-auth?policy=per-user&dim.user=cookie", "", 400},
		{"forward-auth with an unknown parameter", nil, "GET", "/v1/forward-auth?policy=per-user&dim.user=method&colour=red", "", 400},
		{"forward-auth without a policy", nil, "GET", "/v1/forward-auth?dim.user=method", "", 400},
		{"forward-auth of an unknown policy", nil, "GET", "/v1/forward-auth?policy=nope&dim.user=method", "", 404},
		{"a shadow policy", nil, "POST", "/v1/allow", `{"policy":"trial","key":"t"}`, 200},
		{"a shadow policy that would deny", nil, "POST", "/v1/allow", `{"policy":"trial","key":"t"}`, 200},
		{"an unknown policy", nil, "POST", "/v1/allow", `{"policy":"nope","key":"k"}`, 404},
		{"a batch", nil, "POST", "/v1/allow/batch", `{"requests":[
			{"key":"b","limit":{"rate":1,"period":"1h"}},
			{"key":"b","limit":{"rate":1,"period":"1h"}},
			{"key":"c","limit":{"rate":10,"burst":5},"cost":6},
			{"key":"d","policy":"missing"},
			{"checks":[{"key":"e","limit":{"rate":3}},{"policy":"trial","key":"f"}]}]}`, 200},
		{"a batch with a reservation", nil, "POST", "/v1/allow/batch", `{"requests":[
			{"key":"rb","limit":{"algorithm":"gcra","rate":1,"period":"1s","burst":1},"max_wait":"2s"},
			{"key":"rb","limit":{"algorithm":"gcra","rate":1,"period":"1s","burst":1},"max_wait":"2s"}]}`, 200},
		{"put a domain", nil, "PUT", "/v1/rls/domains/edge", "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: minute\n      requests_per_unit: 60\n      algorithm: sliding_window_counter\n  - key: path\n    value: /login\n    rate_limit: {unit: second, requests_per_unit: 5, name: login}\n    shadow_mode: true\n", 200},
		{"put a domain as JSON", nil, "PUT", "/v1/rls/domains/api", `{"domain":"api","descriptors":[{"key":"tenant","descriptors":[{"key":"plan","value":"free","rate_limit":{"unit":"HOUR","requests_per_unit":100,"replaces":[{"name":"x"}]}}]},{"key":"internal","rate_limit":{"unlimited":true}}]}`, 200},
		{"put a domain with a penalty", nil, "PUT", "/v1/rls/domains/penalized", "domain: penalized\ndescriptors:\n  - key: client\n    rate_limit: {unit: minute, requests_per_unit: 60, penalty: {denials: 20, within: 1m, block_for: 10m}}\n", 200},
		{"get a domain", nil, "GET", "/v1/rls/domains/edge", "", 200},
		{"get a domain with a penalty", nil, "GET", "/v1/rls/domains/penalized", "", 200},
		{"put a domain with local shares", nil, "PUT", "/v1/rls/domains/hot", "domain: hot\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: second, requests_per_unit: 1000, local_shares: {ttl: 250ms, max_units: 50}}\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 10, local_shares: {}}\n", 200},
		{"get a domain with local shares", nil, "GET", "/v1/rls/domains/hot", "", 200},
		{"a domain with a share TTL too long", nil, "PUT", "/v1/rls/domains/hot", "domain: hot\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: second, requests_per_unit: 1000, local_shares: {ttl: 2s}}\n", 400},
		{"list domains", nil, "GET", "/v1/rls/domains", "", 200},
		{"a domain with a bad unit", nil, "PUT", "/v1/rls/domains/edge", "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", 400},
		{"a domain under another's path", nil, "PUT", "/v1/rls/domains/other", "domain: edge\n", 400},
		{"delete a domain", nil, "DELETE", "/v1/rls/domains/api", "", 200},
		{"delete the domain again", nil, "DELETE", "/v1/rls/domains/api", "", 404},
		{"get a missing domain", nil, "GET", "/v1/rls/domains/api", "", 404},
		{"a lease", nil, "POST", "/v1/leases", `{"key":"exports","max":1,"ttl":"30s"}`, 200},
		{"a lease while all are held", nil, "POST", "/v1/leases", `{"key":"exports","max":1,"ttl":"30s"}`, 429},
		{"the leases of a key", nil, "GET", "/v1/leases?key=exports", "", 200},
		{"the leases of no key", nil, "GET", "/v1/leases", "", 400},
		{"renew a lease", nil, "POST", "/v1/leases/{lease}/renew", `{"ttl":"1m"}`, 200},
		{"renew a lease with a bad ttl", nil, "POST", "/v1/leases/{lease}/renew", `{"ttl":"forever"}`, 400},
		{"release a lease", nil, "DELETE", "/v1/leases/{lease}", "", 200},
		{"renew a lease not held", nil, "POST", "/v1/leases/{lease}/renew", `{"ttl":"1m"}`, 404},
		{"release it again", nil, "DELETE", "/v1/leases/{lease}", "", 404},
		{"cluster status", nil, "GET", "/v1/cluster", "", 200},
		{"join", nil, "POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"{n2}","http_addr":"127.0.0.1:7002"}`, 200},
		{"join without an HTTP address", nil, "POST", "/v1/cluster/join", `{"id":"n3","raft_addr":"{n3}"}`, 200},
		{"remove a member", nil, "DELETE", "/v1/cluster/nodes/n3", "", 200},
		{"remove a member that is not there", nil, "DELETE", "/v1/cluster/nodes/ghost", "", 404},
		{"the OpenAPI document", nil, "GET", "/v1/openapi.json", "", 200},
		{"a consistency check", nil, "POST", "/v1/cluster/consistency", "", 200},
		{"a hand-over", nil, "POST", "/v1/cluster/transfer-leadership", `{"to":"n2"}`, 200},
		{"a restore on a follower", nil, "POST", "/v1/snapshot", "{backup}", 307},
		{"a hand-over to no one in particular", nil, "POST", "/v1/cluster/transfer-leadership", "", 200},
		{"a hand-over to a stranger", nil, "POST", "/v1/cluster/transfer-leadership", `{"to":"ghost"}`, 404},
		{"a backup", nil, "GET", "/v1/snapshot", "", 200},
		{"a restore", nil, "POST", "/v1/snapshot", "{backup}", 200},
		{"a restore of a foreign file", nil, "POST", "/v1/snapshot", "not one", 400},
		{"stats", nil, "GET", "/v1/stats", "", 200},
		{"stats, top 2", nil, "GET", "/v1/stats?top=2", "", 200},
		{"stats, top 0", nil, "GET", "/v1/stats?top=0", "", 400},
		{"the status page", nil, "GET", "/", "", 200},
		{"healthz", nil, "GET", "/healthz", "", 200},
		{"readyz", nil, "GET", "/readyz", "", 200},
		{"metrics", nil, "GET", "/metrics", "", 200},
		{"a reservation to settle", nil, "POST", "/v1/allow", `{"key":"llm:acme","limit":{"rate":100000,"period":"1h"},"cost":4000,"settle":{"ttl":"2m"}}`, 200},
		{"a reservation to settle without its ttl", nil, "POST", "/v1/allow", `{"key":"llm:acme","limit":{"rate":100000,"period":"1h"},"cost":4000,"settle":{}}`, 400},
		{"a reservation to settle in a batch", nil, "POST", "/v1/allow/batch", `{"requests":[{"key":"llm:bob","limit":{"rate":100000,"period":"1h"},"cost":4000,"settle":{"ttl":"2m"}}]}`, 200},
		{"settle with less", nil, "POST", "/v1/settle", `{"settlement_id":"{settle1}","cost":1200}`, 200},
		{"settle again, a retry", nil, "POST", "/v1/settle", `{"settlement_id":"{settle1}","cost":1200}`, 200},
		{"settle again with another cost", nil, "POST", "/v1/settle", `{"settlement_id":"{settle1}","cost":1300}`, 409},
		{"settle with more", nil, "POST", "/v1/settle", `{"settlement_id":"{settle2}","cost":5000}`, 200},
		{"settle an unknown reservation", nil, "POST", "/v1/settle", `{"settlement_id":"s99","cost":1}`, 404},
		{"settle without a cost", nil, "POST", "/v1/settle", `{"settlement_id":"{settle1}"}`, 400},
		{"settle with a negative cost", nil, "POST", "/v1/settle", `{"settlement_id":"{settle1}","cost":-1}`, 400},
		{"put a policy with max_debt", nil, "PUT", "/v1/policies/tokens", `{"limit":{"rate":100000,"period":"1h"},"max_debt":5000}`, 200},
		{"get a policy with max_debt", nil, "GET", "/v1/policies/tokens", "", 200},
		{"max_debt on a window", nil, "PUT", "/v1/policies/tokens", `{"limit":{"algorithm":"fixed_window","rate":100000,"period":"1h"},"max_debt":5000}`, 400},
		{"block a key", nil, "PUT", "/v1/blocks/scraper", `{"ttl":"10m","reason":"scraping the catalogue"}`, 200},
		{"block a key without a reason", nil, "PUT", "/v1/blocks/u1", `{"ttl":"1h"}`, 200},
		{"block a key without a ttl", nil, "PUT", "/v1/blocks/x", `{"reason":"r"}`, 400},
		{"block a key for a year and more", nil, "PUT", "/v1/blocks/x", `{"ttl":"9000h"}`, 400},
		{"the blocked keys", nil, "GET", "/v1/blocks", "", 200},
		{"a page of the blocked keys", nil, "GET", "/v1/blocks?limit=1&after=a", "", 200},
		{"a page of blocked keys too large", nil, "GET", "/v1/blocks?limit=5000", "", 400},
		{"a blocked key", nil, "POST", "/v1/allow", `{"key":"scraper","limit":{"rate":5}}`, 429},
		{"a blocked key in a batch", nil, "POST", "/v1/allow/batch", `{"requests":[{"key":"scraper","limit":{"rate":5}},{"key":"free","limit":{"rate":5}}]}`, 200},
		{"a blocked key of a policy", nil, "POST", "/v1/allow", `{"policy":"per-user","dimensions":{"user":"u1"}}`, 429},
		{"lift a block", nil, "DELETE", "/v1/blocks/scraper", "", 200},
		{"the audit trail", nil, "GET", "/v1/audit", "", 200},
		{"a page of the audit trail", nil, "GET", "/v1/audit?since=1&limit=1", "", 200},
		{"the audit trail since a bad index", nil, "GET", "/v1/audit?since=-1", "", 400},
		{"a page of the audit trail too large", nil, "GET", "/v1/audit?limit=5000", "", 400},
		{"lift it again", nil, "DELETE", "/v1/blocks/scraper", "", 404},
		{"delete a policy", nil, "DELETE", "/v1/policies/per-user", "", 200},
		{"delete it again", nil, "DELETE", "/v1/policies/per-user", "", 404},
		{"get a missing policy", nil, "GET", "/v1/policies/per-user", "", 404},

		{"malformed JSON", nil, "POST", "/v1/allow", `{"key":`, 400},
		{"an empty body", nil, "POST", "/v1/allow", ``, 400},
		{"an unknown field", nil, "POST", "/v1/allow", `{"key":"a","limit":{"rate":1},"colour":"red"}`, 400},
		{"a zero rate", nil, "POST", "/v1/allow", `{"key":"a","limit":{"rate":0}}`, 400},
		{"a cost above burst", nil, "POST", "/v1/allow", `{"key":"a","limit":{"rate":10,"burst":5},"cost":6}`, 400},
		{"a bad check", nil, "POST", "/v1/allow", `{"checks":[{"key":"b","limit":{"rate":1}},{"key":"c","limit":{"rate":0}}]}`, 400},
		{"an empty batch", nil, "POST", "/v1/allow/batch", `{"requests":[]}`, 400},
		{"a policy without a limit", nil, "PUT", "/v1/policies/p", `{}`, 400},
		{"a policy that sets shadow_denied", nil, "PUT", "/v1/policies/p", `{"limit":{"rate":1},"shadow_denied":5}`, 400},
		{"a lease with a bad ttl", nil, "POST", "/v1/leases", `{"key":"k","max":1,"ttl":"25h"}`, 400},
		{"a join without raft_addr", nil, "POST", "/v1/cluster/join", `{"id":"n3"}`, 400},
		{"an unknown path", nil, "GET", "/v1/nothing", "", 404},
		{"an unknown path under a known one", nil, "POST", "/v1/allow/batch/more", `{}`, 404},
		{"the wrong method", nil, "GET", "/v1/allow", "", 405},
		{"the wrong method on a policy", nil, "POST", "/v1/policies/x", "", 405},
		{"the wrong method on a lease", nil, "GET", "/v1/leases/x", "", 405},
		{"a body over 64 KiB", nil, "POST", "/v1/allow", `{"key":"` + strings.Repeat("k", 70<<10) + `"}`, 413},
		{"a join body over 64 KiB", nil, "POST", "/v1/cluster/join", `{"id":"` + strings.Repeat("k", 70<<10) + `"}`, 413},

		{"take a share", nil, "POST", "/v1/allow", `{"key":"shared","limit":{"rate":100,"local_shares":{}},"take_share":{"units":10,"ttl":"500ms"}}`, 200},
		{"give a share back", nil, "POST", "/v1/shares/return", `{"key":"shared","limit":{"rate":100},"id":"{share}","unspent":4}`, 200},
		{"give a share back by its bare number", nil, "POST", "/v1/shares/return", `{"key":"shared","limit":{"rate":100},"id":"1","unspent":4}`, 400},
		{"give a share back without its id", nil, "POST", "/v1/shares/return", `{"key":"shared","limit":{"rate":100},"unspent":4}`, 400},
		{"list the keys", nil, "GET", "/v1/keys?limit=2", "", 200},
		{"list the keys with a prefix", nil, "GET", "/v1/keys?prefix=k&after=k&limit=100", "", 200},
		{"a page of keys too large", nil, "GET", "/v1/keys?limit=5000", "", 400},
		{"get a key", nil, "GET", "/v1/keys/k", "", 200},
		{"get a key without state", nil, "GET", "/v1/keys/nobody", "", 404},
		{"reset a key", nil, "DELETE", "/v1/keys/k", "", 200},
		{"reset a key without state", nil, "DELETE", "/v1/keys/k", "", 404},
		{"no leader", stopTheOtherVoter, "POST", "/v1/allow", `{"key":"k","limit":{"rate":5}}`, 503},
		{"no leader for a batch", nil, "POST", "/v1/allow/batch", `{"requests":[{"key":"k","limit":{"rate":5}}]}`, 503},
		{"no leader for a policy", nil, "PUT", "/v1/policies/p", `{"limit":{"rate":1}}`, 503},
		{"no leader for a join", nil, "POST", "/v1/cluster/join", `{"id":"n4","raft_addr":"127.0.0.1:8004"}`, 503},
		{"not ready", nil, "GET", "/readyz", "", 503},
	}

	exercised := map[string]bool{}
	for _, st := range steps {
		ok := t.Run(st.name, func(t *testing.T) {
			if st.before != nil {
				st.before(t, c)
			}
			rec := serveValidated(t, h, st.method, fill(st.path), fill(st.body))
			if rec.Code != st.want {
				t.Fatalf("%s %s answered %d, want %d: %.300s\nn1's view: %+v", st.method, st.path, rec.Code, st.want, rec.Body, c.n1.Status())
			}
			if capture := capturedFrom[st.name]; capture != nil {
				name, value := capture(rec.Body.Bytes())
				if value == "" {
					t.Fatalf("the answer has no %s for the steps after it: %.300s", name, rec.Body)
				}
				vars[name] = value
			}
			if op := spec.operation(newOpenAPIRequest(st.method, st.path, "")); op != "" {
				exercised[op] = true
			}
		})
		if !ok {
			t.FailNow() // the steps after it build on it
		}
	}
	for path, item := range spec.doc.Paths.Map() {
		for method := range item.Operations() {
			if op := method + " " + path; !exercised[op] {
				t.Errorf("no step exercises %s", op)
			}
		}
	}
}
