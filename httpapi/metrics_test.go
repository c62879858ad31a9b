package httpapi

import (
	"strings"
	"testing"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	api := newTestAPI(newFake())
	do(t, api, "POST", "/v1/allow", `{"key":"k","limit":{"rate":1,"period":"1h"}}`)
	do(t, api, "POST", "/v1/allow", `{"key":"k","limit":{"rate":1,"period":"1h"}}`)
	do(t, api, "POST", "/v1/allow", `{"key":"k","limit":{"rate":0}}`)
	rec := do(t, api, "GET", "/metrics", "")
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	body := rec.Body.String()
	for _, want := range []string{
		`limitnode_decisions_total{outcome="allowed"} 1`,
		`limitnode_decisions_total{outcome="denied"} 1`,
		`limitnode_http_requests_total{code="200",route="/v1/allow"} 1`,
		`limitnode_http_requests_total{code="429",route="/v1/allow"} 1`,
		`limitnode_http_requests_total{code="400",route="/v1/allow"} 1`,
		`limitnode_http_request_duration_seconds_count{route="/v1/allow"} 3`,
		`limitnode_raft_term 3`,
		`limitnode_raft_commit_index 120`,
		`limitnode_is_leader 1`,
		`limitnode_cluster_members 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
