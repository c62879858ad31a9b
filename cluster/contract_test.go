package cluster_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/contract"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

func do(t testing.TB, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s %s answered %d with %q", method, url, resp.StatusCode, data)
	}
	return resp.StatusCode, out
}

// postBatch sends POST /v1/allow/batch with n requests made by request and
// decodes the 200 answer into out.
func postBatch(t *testing.T, baseURL string, n int, request func(i int) string, out any) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"requests":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(request(i))
	}
	b.WriteString("]}")
	resp, err := httpClient.Post(baseURL+"/v1/allow/batch", "application/json", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("batch: status %d, %v", resp.StatusCode, err)
	}
}

// TestPerClientAndGlobalLimitsTogether: 32 callers spread over all nodes,
// 16 clients, each request checked against its client's limit (5 an hour)
// and a global one (50 an hour) atomically. Every admission consumed from
// both and every denial from neither, so afterwards each counter holds
// exactly what was admitted against it.
func TestPerClientAndGlobalLimitsTogether(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	const clients, callers, attempts = 16, 32, 8
	var admitted [clients]atomic.Int64
	var wg sync.WaitGroup
	for caller := range callers {
		wg.Go(func() {
			client := caller % clients
			url := c.Nodes[caller%3].URL() + "/v1/allow"
			body := fmt.Sprintf(`{"checks":[
				{"key":"client:%d","limit":{"rate":5,"period":"1h"}},
				{"key":"global","limit":{"rate":50,"period":"1h"}}]}`, client)
			for range attempts {
				a := decided(t, url, body)
				switch a.status {
				case 200:
					admitted[client].Add(1)
				case 429:
				default:
					t.Errorf("status %d", a.status)
				}
			}
		})
	}
	wg.Wait()
	total := int64(0)
	for client := range clients {
		n := admitted[client].Load()
		total += n
		a := decided(t, c.Nodes[client%3].URL()+"/v1/allow", fmt.Sprintf(`{"key":"client:%d","limit":{"rate":5,"period":"1h"},"cost":0}`, client))
		if n > 5 || a.Remain != 5-n {
			t.Errorf("client %d: %d admitted, %d left of 5", client, n, a.Remain)
		}
	}
	a := decided(t, c.Nodes[0].URL()+"/v1/allow", `{"key":"global","limit":{"rate":50,"period":"1h"},"cost":0}`)
	if total != 50 || a.Remain != 0 {
		t.Fatalf("%d admitted in all, global has %d left; want 50 and 0", total, a.Remain)
	}
}

// TestPolicyChangeTakesEffectOnEveryNode changes a policy through one node
// and sees every node decide under the new limit at once: the change and
// the decisions are ordered by the Raft log.
func TestPolicyChangeTakesEffectOnEveryNode(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	followers := c.Followers()
	if status, body := do(t, "PUT", followers[0].URL()+"/v1/policies/tenant", `{"limit":{"rate":2,"period":"1h"}}`); status != 200 {
		t.Fatalf("PUT: %d %v", status, body)
	}
	for i, n := range c.Nodes {
		a := decided(t, n.URL()+"/v1/allow", `{"key":"t1","policy":"tenant"}`)
		if want := map[bool]int{true: 200, false: 429}[i < 2]; a.status != want || a.Limit != 2 {
			t.Fatalf("under the first limit, %s answered %d limit %d", n.ID, a.status, a.Limit)
		}
		if got := a.header.Get("RateLimit-Policy"); got != `"tenant";q=2;w=3600` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
	}
	if status, body := do(t, "PUT", followers[1].URL()+"/v1/policies/tenant", `{"limit":{"rate":100,"period":"1h"}}`); status != 200 {
		t.Fatalf("PUT: %d %v", status, body)
	}
	for _, n := range c.Nodes {
		// The two units used under the old limit carry over.
		if a := decided(t, n.URL()+"/v1/allow", `{"key":"t1","policy":"tenant","cost":0}`); a.status != 200 || a.Limit != 100 || a.Remain != 98 {
			t.Fatalf("after the change, %s answered %d limit %d remaining %d", n.ID, a.status, a.Limit, a.Remain)
		}
	}
	// Every node's own copy of the policy catches up too.
	for _, n := range c.Nodes {
		testenv.WaitFor(t, n.ID+" to show the new policy", func() bool {
			_, p := do(t, "GET", n.URL()+"/v1/policies/tenant", "")
			limit, _ := p["limit"].(map[string]any)
			return limit != nil && limit["rate"] == 100.0
		})
	}
}

// TestShadowModeAdmitsWhileCounting: a shadow policy of 3 an hour admits
// ten requests and counts the seven it would have denied.
func TestShadowModeAdmitsWhileCounting(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	if status, _ := do(t, "PUT", c.Nodes[1].URL()+"/v1/policies/trial", `{"limit":{"rate":3,"period":"1h"},"shadow":true}`); status != 200 {
		t.Fatalf("PUT: %d", status)
	}
	for i := range 10 {
		if a := decided(t, c.Nodes[i%3].URL()+"/v1/allow", `{"key":"k","policy":"trial"}`); a.status != 200 || !a.Allowed {
			t.Fatalf("request %d: %d", i, a.status)
		}
	}
	leader := c.WaitLeader()
	if _, p := do(t, "GET", leader.URL()+"/v1/policies/trial", ""); p["shadow_denied"] != 7.0 {
		t.Fatalf("shadow_denied %v, want 7", p["shadow_denied"])
	}
}

// TestBatchOf500 sends 500 requests over 50 keys of 5 an hour in one call:
// in each key's order, the first five are admitted and the rest denied.
func TestBatchOf500(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	var out struct {
		Responses []struct {
			Status    int   `json:"status"`
			Allowed   bool  `json:"allowed"`
			Remaining int64 `json:"remaining"`
		} `json:"responses"`
	}
	postBatch(t, c.Followers()[0].URL(), 500, func(i int) string {
		return fmt.Sprintf(`{"key":"batch:%d","limit":{"rate":5,"period":"1h"}}`, i%50)
	}, &out)
	if len(out.Responses) != 500 {
		t.Fatalf("%d responses", len(out.Responses))
	}
	for i, r := range out.Responses {
		nth := int64(i / 50) // this is the nth request for its key
		wantStatus, wantRemaining := 200, 4-nth
		if nth >= 5 {
			wantStatus, wantRemaining = 429, 0
		}
		if r.Status != wantStatus || r.Allowed != (nth < 5) || r.Remaining != wantRemaining {
			t.Fatalf("response %d: %+v, want status %d remaining %d", i, r, wantStatus, wantRemaining)
		}
	}
}

// TestBadInputOnTheContractSurfaces sends bad requests to each new surface
// through a follower.
func TestBadInputOnTheContractSurfaces(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	url := c.Followers()[0].URL()
	if status, _ := do(t, "PUT", url+"/v1/policies/routes", `{"limit":{"rate":5},"key_template":"{api_key}:{route}"}`); status != 200 {
		t.Fatalf("PUT: %d", status)
	}
	tooManyChecks := `{"checks":[` + strings.Repeat(`{"key":"a","limit":{"rate":1}},`, 32) + `{"key":"z","limit":{"rate":1}}]}`
	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantField                string
		wantInError              string
	}{
		{"an unknown policy", "POST", "/v1/allow", `{"key":"k","policy":"nope"}`, 404, "policy", "does not exist"},
		{"duplicate checks", "POST", "/v1/allow", `{"checks":[{"key":"k","limit":{"rate":1}},{"key":"k","limit":{"rate":1}}]}`, 400, "checks[1].key", ""},
		{"duplicate checks through one policy", "POST", "/v1/allow", `{"checks":[{"key":"k","policy":"routes-x"},{"key":"k","policy":"routes-x"}]}`, 400, "checks[1].key", ""},
		{"empty checks", "POST", "/v1/allow", `{"checks":[]}`, 400, "checks", ""},
		{"too many checks", "POST", "/v1/allow", tooManyChecks, 400, "checks", ""},
		{"too many batch items", "POST", "/v1/allow/batch", `{"requests":[` + strings.Repeat(`{"key":"a","limit":{"rate":1}},`, 1000) + `{"key":"a","limit":{"rate":1}}]}`, 400, "requests", ""},
		{"a template without placeholders", "PUT", "/v1/policies/bad", `{"limit":{"rate":1},"key_template":"static"}`, 400, "key_template", "no {placeholder}"},
		{"an unbalanced template", "PUT", "/v1/policies/bad", `{"limit":{"rate":1},"key_template":"{api_key"}`, 400, "key_template", "without its }"},
		{"missing dimensions", "POST", "/v1/allow", `{"policy":"routes","dimensions":{"api_key":"abc"}}`, 400, "dimensions", "route"},
		{"an unknown dimension", "POST", "/v1/allow", `{"policy":"routes","dimensions":{"api_key":"abc","route":"/x","region":"eu"}}`, 400, "dimensions", "region"},
		{"a cost over the policy's limit", "POST", "/v1/allow", `{"policy":"routes","dimensions":{"api_key":"abc","route":"/x"},"cost":6}`, 400, "cost", ""},
		{"a plain key to a templated policy", "POST", "/v1/allow", `{"key":"k","policy":"routes"}`, 400, "key", "give dimensions"},
		{"a join of a node that is not running", "POST", "/v1/cluster/join", `{"id":"n9","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, 400, "raft_addr", "does not answer as a limitnode node"},
		{"a join naming a member's address under another ID", "POST", "/v1/cluster/join", `{"id":"n9","raft_addr":"` + c.Nodes[0].RaftAddr + `"}`, 400, "id", "is \"n1\", not \"n9\""},
	}
	for _, tt := range tests {
		status, body := do(t, tt.method, url+tt.path, tt.body)
		msg, _ := body["error"].(string)
		if status != tt.wantStatus || body["field"] != tt.wantField || !strings.Contains(msg, tt.wantInError) {
			t.Errorf("%s: %d %v, want %d on %q mentioning %q", tt.name, status, body, tt.wantStatus, tt.wantField, tt.wantInError)
		}
	}
	// The template works when the dimensions are right.
	a := decided(t, url+"/v1/allow", `{"policy":"routes","dimensions":{"api_key":"abc","route":"/export"},"cost":2}`)
	if a.status != 200 || a.Remain != 3 {
		t.Fatalf("a good templated request: %d remaining %d", a.status, a.Remain)
	}
}

// TestKeyLimitRefusesNewKeysOnly: with a cap of 100 live keys, a batch of
// 150 new keys gets 100 decisions and 50 clear refusals, and keys already
// live keep being decided.
func TestKeyLimitRefusesNewKeysOnly(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{Configure: func(cfg *cluster.Config) { cfg.MaxKeys = 100 }})
	var out struct {
		Responses []struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"responses"`
	}
	postBatch(t, c.Followers()[0].URL(), 150, func(i int) string {
		return fmt.Sprintf(`{"key":"flood:%d","limit":{"rate":5,"period":"1h"}}`, i)
	}, &out)
	counts := map[string]int{}
	for _, r := range out.Responses {
		counts[fmt.Sprint(r.Status, r.Code)]++
	}
	if counts["200"] != 100 || counts["503unavailable"] != 50 {
		t.Fatalf("answers %v, want 100 × 200 and 50 × 503 unavailable", counts)
	}
	if a := decided(t, c.Nodes[2].URL()+"/v1/allow", `{"key":"flood:0","limit":{"rate":5,"period":"1h"}}`); a.status != 200 || a.Remain != 3 {
		t.Fatalf("a live key: %d remaining %d", a.status, a.Remain)
	}
	if a := post(t, c.Nodes[2].URL()+"/v1/allow", `{"key":"new","limit":{"rate":5,"period":"1h"}}`); a.status != 503 || a.header.Get("Retry-After") != "1" {
		t.Fatalf("a new key at the cap: %d", a.status)
	}
}

// TestConcurrencyLeases: 24 callers on all nodes race for 5 slots; exactly 5
// win. A slot given back through another node is free at once, and a slot
// never given back frees itself at its TTL.
func TestConcurrencyLeases(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	var granted atomic.Int64
	var ids sync.Map
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			status, body := do(t, "POST", c.Nodes[i%3].URL()+"/v1/leases", `{"key":"exports","max":5,"ttl":"1h"}`)
			switch status {
			case 200:
				granted.Add(1)
				ids.Store(body["id"].(string), true)
			case 429:
			default:
				t.Errorf("status %d: %v", status, body)
			}
		})
	}
	wg.Wait()
	if granted.Load() != 5 {
		t.Fatalf("%d of 24 callers got one of 5 slots", granted.Load())
	}
	var some string
	ids.Range(func(k, _ any) bool { some = k.(string); return false })
	if status, _ := do(t, "DELETE", c.Nodes[1].URL()+"/v1/leases/"+some, ""); status != 200 {
		t.Fatalf("release: %d", status)
	}
	if status, body := do(t, "POST", c.Nodes[2].URL()+"/v1/leases", `{"key":"exports","max":5,"ttl":"1h"}`); status != 200 || body["active"] != 5.0 {
		t.Fatalf("after a release: %d %v", status, body)
	}

	if status, _ := do(t, "POST", c.Nodes[0].URL()+"/v1/leases", `{"key":"short","max":1,"ttl":"300ms"}`); status != 200 {
		t.Fatalf("short lease: %d", status)
	}
	status, body := do(t, "POST", c.Nodes[0].URL()+"/v1/leases", `{"key":"short","max":1,"ttl":"300ms"}`)
	if status != 429 || body["retry_after_ms"].(float64) > 300 {
		t.Fatalf("while held: %d %v", status, body)
	}
	testenv.WaitFor(t, "the lease to expire", func() bool {
		status, _ := do(t, "POST", c.Nodes[1].URL()+"/v1/leases", `{"key":"short","max":1,"ttl":"300ms"}`)
		return status == 200
	})
}

// TestLeaderHeaderNamesTheDecidingLeader checks X-Limitnode-Leader on
// answers from the leader and from a follower, single and batch, and the
// Go API's Decision.Leader.
func TestLeaderHeaderNamesTheDecidingLeader(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	// checkLeader allows for an election during the request on a loaded
	// machine: the header must then name the leader before or after it.
	checkLeader := func(t *testing.T, before, got string) {
		t.Helper()
		if after := c.WaitLeader().ID; got != before && got != after {
			t.Fatalf("decided by %q, but the leader was %q before and %q after", got, before, after)
		}
	}
	tests := []struct {
		name, path, body string
		onLeader         bool
	}{
		{"allow on the leader", "/v1/allow", `{"key":"h1","limit":{"rate":5,"period":"1m"}}`, true},
		{"allow on a follower", "/v1/allow", `{"key":"h2","limit":{"rate":1,"period":"1m"}}`, false},
		{"denied on a follower", "/v1/allow", `{"key":"h2","limit":{"rate":1,"period":"1m"}}`, false},
		{"batch on a follower", "/v1/allow/batch", `{"requests":[{"key":"h4","limit":{"rate":5,"period":"1m"}}]}`, false},
	}
	for _, tt := range tests { // in order: the third uses up what the second left
		t.Run(tt.name, func(t *testing.T) {
			leader := c.WaitLeader()
			node := leader
			if !tt.onLeader {
				node = c.Followers()[0]
			}
			resp, err := httpClient.Post(node.URL()+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("status %d", resp.StatusCode)
			}
			checkLeader(t, leader.ID, resp.Header.Get("X-Limitnode-Leader"))
		})
	}
	leader := c.WaitLeader()
	d, err := c.Followers()[0].Node().Allow(t.Context(), contract.Request{Checks: []contract.Check{{Key: "h5", Limit: algorithms.Limit{Rate: 5, Period: time.Minute, Burst: 5}, Cost: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	checkLeader(t, leader.ID, d.Leader)
}

// TestRepeatedRequestIDIsMarkedOverHTTP: a retry with the same request ID is
// answered with the first decision, consumes nothing, and says so with
// "duplicate": true (the Go API's Decision.Duplicate).
func TestRepeatedRequestIDIsMarkedOverHTTP(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	const body = `{"key":"order","limit":{"rate":5,"period":"1h"},"request_id":"order-1"}`
	status, first := do(t, "POST", c.Nodes[0].URL()+"/v1/allow", body)
	if status != 200 || first["duplicate"] != nil || first["remaining"] != 4.0 {
		t.Fatalf("first: %d %v", status, first)
	}
	status, again := do(t, "POST", c.Nodes[1].URL()+"/v1/allow", body)
	if status != 200 || again["duplicate"] != true || again["remaining"] != 4.0 {
		t.Fatalf("the retry: %d %v, want the first decision marked duplicate", status, again)
	}
	if status, next := do(t, "POST", c.Nodes[2].URL()+"/v1/allow", `{"key":"order","limit":{"rate":5,"period":"1h"}}`); status != 200 || next["remaining"] != 3.0 {
		t.Fatalf("the retry consumed: %d %v", status, next)
	}
}

// TestHeldLeasesAreListed: GET /v1/leases?key= shows the leases of every
// group of a key on any node, and a lease given back leaves the list.
func TestHeldLeasesAreListed(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	var ids []string
	for i, body := range []string{`{"key":"reports","max":5,"ttl":"1m"}`, `{"key":"reports","max":2,"ttl":"1m"}`, `{"key":"other","max":5,"ttl":"1m"}`} {
		status, out := do(t, "POST", c.Nodes[i].URL()+"/v1/leases", body)
		if status != 200 {
			t.Fatalf("acquire %s: %d %v", body, status, out)
		}
		ids = append(ids, out["id"].(string))
	}
	list := func() []any {
		_, out := do(t, "GET", c.Nodes[2].URL()+"/v1/leases?key=reports", "")
		leases, _ := out["leases"].([]any)
		return leases
	}
	testenv.WaitFor(t, "both leases of the key to be listed", func() bool { return len(list()) == 2 })
	if first := list()[0].(map[string]any); first["id"] != ids[1] || first["max"] != 2.0 {
		t.Fatalf("the group of max 2 first: %v", list())
	}
	if status, _ := do(t, "DELETE", c.Nodes[0].URL()+"/v1/leases/"+ids[0], ""); status != 200 {
		t.Fatalf("release: %d", status)
	}
	testenv.WaitFor(t, "the lease given back to leave the list", func() bool { return len(list()) == 1 })
}

// TestOverridesByDimension: with a key template, an override may name one
// dimension's value ("tenant=tenant-42") and then applies to every key made
// with it; a key's own override wins, and so does the template's first
// placeholder over a later one.
func TestOverridesByDimension(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	const policy = `{"limit":{"rate":100,"period":"1m"},"key_template":"{tenant}:{route}","overrides":{
		"tenant=tenant-42":{"rate":1000,"period":"1m"},
		"route=/export":{"rate":10,"period":"1m"},
		"tenant-42:/admin":{"rate":5,"period":"1m"}}}`
	if status, body := do(t, "PUT", c.Nodes[0].URL()+"/v1/policies/per-tenant-route", policy); status != 200 {
		t.Fatalf("PUT: %d %v", status, body)
	}
	tests := []struct {
		tenant, route string
		wantLimit     float64
	}{
		{"tenant-7", "/search", 100},   // no override
		{"tenant-42", "/search", 1000}, // the tenant's
		{"tenant-7", "/export", 10},    // the route's
		{"tenant-42", "/export", 1000}, // tenant is the first placeholder
		{"tenant-42", "/admin", 5},     // the key's own
	}
	for _, tt := range tests {
		a := decided(t, c.Nodes[1].URL()+"/v1/allow", `{"policy":"per-tenant-route","dimensions":{"tenant":"`+tt.tenant+`","route":"`+tt.route+`"}}`)
		if a.status != 200 || float64(a.Limit) != tt.wantLimit {
			t.Errorf("%s %s: status %d limit %d, want %v", tt.tenant, tt.route, a.status, a.Limit, tt.wantLimit)
		}
	}
}

// TestARequestIDCannotBeBorrowed: an ID first used on a key with room left,
// sent again on a spent key, used to be answered "allowed" and consume
// nothing. A different request under a used ID is now a 409 conflict, and
// IDs are scoped to the token: another caller's use of an ID neither blocks
// nor answers yours.
func TestARequestIDCannotBeBorrowed(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{Secure: true})
	url := c.Nodes[1].URL() + "/v1/allow"
	send := func(token, body string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	decide, admin := testcluster.Token(auth.RoleDecide), testcluster.Token(auth.RoleAdmin)
	if status, out := send(decide, `{"key":"spent","limit":{"rate":1,"period":"1h"}}`); status != 200 {
		t.Fatalf("spend: %d %v", status, out)
	}
	if status, out := send(decide, `{"key":"roomy","limit":{"rate":9,"period":"1h"},"request_id":"pay-1"}`); status != 200 {
		t.Fatalf("first use of the ID: %d %v", status, out)
	}
	if status, out := send(decide, `{"key":"spent","limit":{"rate":1,"period":"1h"},"request_id":"pay-1"}`); status != 409 || out["code"] != "conflict" || out["field"] != "request_id" {
		t.Fatalf("the ID borrowed for a spent key: %d %v, want 409 conflict", status, out)
	}
	// Another token's pay-1 is its own: decided, not a duplicate, not a conflict.
	if status, out := send(admin, `{"key":"spent-too","limit":{"rate":1,"period":"1h"},"request_id":"pay-1"}`); status != 200 || out["duplicate"] != nil {
		t.Fatalf("another token's ID: %d %v", status, out)
	}
	if status, out := send(decide, `{"key":"roomy","limit":{"rate":9,"period":"1h"},"request_id":"pay-1"}`); status != 200 || out["duplicate"] != true {
		t.Fatalf("the real retry: %d %v, want the first decision", status, out)
	}
}

// TestPoliciesArePaged: GET /v1/policies answers a page of at most limit
// policies and the name to continue after; the pages together list every
// policy once.
func TestPoliciesArePaged(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	for _, name := range []string{"c", "a", "e", "b", "d"} {
		if status, _ := do(t, "PUT", c.Nodes[0].URL()+"/v1/policies/"+name, `{"limit":{"rate":1}}`); status != 200 {
			t.Fatalf("PUT %s: %d", name, status)
		}
	}
	leader := c.WaitLeader()
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		status, out := do(t, "GET", leader.URL()+"/v1/policies?limit=2&after="+after, "")
		if status != 200 || pages > 3 {
			t.Fatalf("page %d: %d %v", pages, status, out)
		}
		for _, p := range out["policies"].([]any) {
			got = append(got, p.(map[string]any)["name"].(string))
		}
		next, _ := out["next"].(string)
		if next == "" {
			break
		}
		after = next
	}
	if strings.Join(got, ",") != "a,b,c,d,e" {
		t.Fatalf("pages listed %v", got)
	}
	if status, out := do(t, "GET", leader.URL()+"/v1/policies?limit=0", ""); status != 400 || out["field"] != "limit" {
		t.Fatalf("limit 0: %d %v", status, out)
	}
}
