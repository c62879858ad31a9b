package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAJobTheBackendDoesNotDoIsA501: an embedding program may serve a
// backend that only decides. Its decisions are served; every route of
// another job answers 501, code not_implemented, naming the interface the
// backend lacks, and never reaches a nil job.
func TestAJobTheBackendDoesNotDoIsA501(t *testing.T) {
	t.Parallel()
	onlyDecides := struct{ Decider }{newFake()}
	h := New(onlyDecides, Options{Logger: slog.New(slog.DiscardHandler)})
	tests := []struct {
		method, path, body string
		status             int
		lacks              string // in the message of a 501
	}{
		{"POST", "/v1/allow", `{"key":"k","limit":{"rate":5,"period":"1m"}}`, 200, ""},
		{"GET", "/v1/policies", "", 501, "PolicyStore"},
		{"PUT", "/v1/policies/p", `{"limit":{"rate":5,"period":"1m"}}`, 501, "PolicyStore"},
		{"GET", "/v1/rls/domains", "", 501, "RLSStore"},
		{"POST", "/v1/leases", `{"key":"k","max":1,"ttl":"1m"}`, 501, "LeaseKeeper"},
		{"GET", "/v1/keys/k", "", 501, "KeyStore"},
		{"PUT", "/v1/blocks/k", `{"ttl":"1m"}`, 501, "BlockList"},
		{"GET", "/v1/audit", "", 501, "AuditLog"},
		{"POST", "/v1/settle", `{"settlement_id":"s1.1","cost":1}`, 501, "Settler"},
		{"GET", "/v1/cluster", "", 501, "Observer"},
		{"POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, 501, "Membership"},
		{"GET", "/v1/snapshot", "", 501, "Backups"},
		{"GET", "/v1/stats", "", 501, "Observer"},
		{"GET", "/readyz", "", 501, "Observer"},
		{"GET", "/healthz", "", 200, ""},
		{"GET", "/metrics", "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tt.method, "http://127.0.0.1"+tt.path, strings.NewReader(tt.body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if tt.status != http.StatusNotImplemented {
				return
			}
			var body struct{ Error, Code string }
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Code != "not_implemented" || !strings.Contains(body.Error, tt.lacks) {
				t.Fatalf("body %s (%v), want code not_implemented naming %s", w.Body, err, tt.lacks)
			}
		})
	}
}
