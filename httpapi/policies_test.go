package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
)

func TestPolicyEndpoints(t *testing.T) {
	t.Parallel()
	fake := newFake()
	api := newTestAPI(fake)

	rec := do(t, api, "PUT", "/v1/policies/per-tenant", `{"limit":{"rate":100,"period":"1m"},"overrides":{"vip":{"rate":1000,"period":"1m","algorithm":"fixed_window"}},"key_template":"{tenant}"}`)
	if rec.Code != 200 {
		t.Fatalf("PUT: %d %s", rec.Code, rec.Body)
	}
	stored := fake.policies["per-tenant"]
	want := contract.Policy{
		Name:        "per-tenant",
		Limit:       algorithms.Limit{Rate: 100, Period: time.Minute, Burst: 100},
		Overrides:   []contract.Override{{Key: "vip", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 1000, Period: time.Minute}}},
		KeyTemplate: "{tenant}",
	}
	if stored.Name != want.Name || stored.Limit != want.Limit || len(stored.Overrides) != 1 || stored.Overrides[0] != want.Overrides[0] || stored.KeyTemplate != want.KeyTemplate {
		t.Fatalf("stored %+v\nwant   %+v", stored, want)
	}

	rec = do(t, api, "GET", "/v1/policies/per-tenant", "")
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || got != `{"name":"per-tenant","limit":{"algorithm":"token_bucket","rate":100,"period":"1m0s","burst":100},"overrides":{"vip":{"algorithm":"fixed_window","rate":1000,"period":"1m0s"}},"shadow":false,"key_template":"{tenant}","shadow_denied":0}` {
		t.Fatalf("GET: %d %s", rec.Code, got)
	}
	rec = do(t, api, "GET", "/v1/policies", "")
	var list struct{ Policies []wire.Policy }
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Policies) != 1 {
		t.Fatalf("list: %s", rec.Body)
	}

	bad := []struct {
		name, body, field string
	}{
		{"no limit", `{}`, "limit"},
		{"a bad rate", `{"limit":{"rate":0}}`, "limit.rate"},
		{"a bad override", `{"limit":{"rate":1},"overrides":{"k":{"rate":-1}}}`, `overrides["k"].rate`},
		{"a name that differs from the path", `{"name":"other","limit":{"rate":1}}`, "name"},
		{"shadow_denied set by hand", `{"limit":{"rate":1},"shadow_denied":5}`, "shadow_denied"},
		{"an unknown field", `{"limit":{"rate":1},"colour":"red"}`, "colour"},
	}
	for _, tt := range bad {
		rec := do(t, api, "PUT", "/v1/policies/p", tt.body)
		if rec.Code != 400 || decodeBody(t, rec)["field"] != tt.field {
			t.Errorf("%s: %d %s", tt.name, rec.Code, rec.Body)
		}
	}
	if rec := do(t, api, "GET", "/v1/policies/missing", ""); rec.Code != 404 {
		t.Fatalf("GET missing: %d", rec.Code)
	}
	if rec := do(t, api, "DELETE", "/v1/policies/per-tenant", ""); rec.Code != 200 {
		t.Fatalf("DELETE: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, api, "DELETE", "/v1/policies/per-tenant", ""); rec.Code != 404 || decodeBody(t, rec)["code"] != "not_found" {
		t.Fatalf("DELETE again: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, api, "POST", "/v1/policies/x", ""); rec.Code != 405 || rec.Header().Get("Allow") != "DELETE, GET, HEAD, PUT" {
		t.Fatalf("POST a policy: %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

func TestAllowWithAPolicyNamesItInTheHeaders(t *testing.T) {
	t.Parallel()
	fake := newFake()
	api := newTestAPI(fake)
	do(t, api, "PUT", "/v1/policies/burst", `{"limit":{"rate":50,"period":"1m"}}`)
	rec := do(t, api, "POST", "/v1/allow", `{"key":"k","policy":"burst","cost":2}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("RateLimit-Policy"); got != `"burst";q=50;w=60` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
	if got := rec.Header().Get("RateLimit"); got != `"burst";r=48;t=2` {
		t.Fatalf("RateLimit %q", got)
	}
	if rec := do(t, api, "POST", "/v1/allow", `{"key":"k","policy":"nope"}`); rec.Code != 404 {
		t.Fatalf("unknown policy: %d %s", rec.Code, rec.Body)
	}
}

func TestShadowChecksAreReportedButNeverDeny(t *testing.T) {
	t.Parallel()
	fake := newFake()
	api := newTestAPI(fake)
	do(t, api, "PUT", "/v1/policies/trial", `{"limit":{"rate":1,"period":"1h"},"shadow":true}`)
	do(t, api, "POST", "/v1/allow", `{"key":"k","policy":"trial"}`)
	rec := do(t, api, "POST", "/v1/allow", `{"key":"k","policy":"trial"}`)
	body := decodeBody(t, rec)
	checks, _ := body["checks"].([]any)
	if rec.Code != 200 || body["allowed"] != true || len(checks) != 1 {
		t.Fatalf("shadow denial answered %d %s", rec.Code, rec.Body)
	}
	if c := checks[0].(map[string]any); c["shadow"] != true || c["allowed"] != false || c["policy"] != "trial" {
		t.Fatalf("check %v", c)
	}
	if rec.Header().Get("Retry-After") != "" {
		t.Fatal("an allowed answer carries Retry-After")
	}
}

func TestBatch(t *testing.T) {
	t.Parallel()
	fake := newFake()
	api := newTestAPI(fake)
	body := `{"requests":[
		{"key":"a","limit":{"rate":1,"period":"1h"}},
		{"key":"a","limit":{"rate":1,"period":"1h"}},
		{"key":"b","limit":{"rate":0}},
		{"key":"c","policy":"missing"}
	]}`
	rec := do(t, api, "POST", "/v1/allow/batch", body)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out struct {
		Responses []map[string]any `json:"responses"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		status  float64
		allowed any
		field   any
	}{{200, true, nil}, {429, false, nil}, {400, nil, "requests[2].limit.rate"}, {404, nil, "requests[3].policy"}}
	if len(out.Responses) != len(want) {
		t.Fatalf("%d responses: %s", len(out.Responses), rec.Body)
	}
	for i, w := range want {
		r := out.Responses[i]
		if r["status"] != w.status || r["allowed"] != w.allowed || r["field"] != w.field {
			t.Errorf("response %d: %v, want status %v allowed %v field %v", i, r, w.status, w.allowed, w.field)
		}
	}
	if fake.batches != 1 {
		t.Fatalf("%d calls to the cluster for one batch", fake.batches)
	}
	tooMany := `{"requests":[` + strings.Repeat(`{"key":"a","limit":{"rate":1}},`, contract.MaxBatchSize) + `{"key":"a","limit":{"rate":1}}]}`
	if rec := do(t, api, "POST", "/v1/allow/batch", tooMany); rec.Code != 400 || decodeBody(t, rec)["field"] != "requests" {
		t.Fatalf("an oversized batch: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, api, "POST", "/v1/allow/batch", `{"requests":[]}`); rec.Code != 400 {
		t.Fatalf("an empty batch: %d", rec.Code)
	}
}

func testPolicy(name string) contract.Policy {
	return contract.Policy{Name: name, Limit: algorithms.Limit{Rate: 10, Period: time.Second, Burst: 10}}
}
