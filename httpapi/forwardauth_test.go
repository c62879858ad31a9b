package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// TestForwardAuthFindsTheClientBehindItsProxy asks forward-auth with
// dim.user=client_ip as proxies do (the default trusted proxies: loopback)
// and finds the key the fake decided: the client behind the proxy, without
// an IPv6 zone; an X-Forwarded-For entry the walk reaches that is not an
// address is a 400 naming the header, never the proxy's own address.
func TestForwardAuthFindsTheClientBehindItsProxy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, peer, forwardedFor string
		wantKey                  string
		wantStatus               int
	}{
		{"the client a proxy names", "127.0.0.1:5000", "198.51.100.7", "198.51.100.7", 200},
		{"garbage left of the client is never read", "127.0.0.1:5000", "junk, 198.51.100.7", "198.51.100.7", 200},
		{"a zone is not part of the key", "[::1]:5000", "fe80::9%eth3", "fe80::9", 200},
		{"a peer's zone is not part of the key", "[fe80::1%eth0]:5000", "", "fe80::1", 200},
		{"an entry that is not an address", "127.0.0.1:5000", "unknown", "", 400},
		{"a proxy's garbage behind another proxy", "127.0.0.1:5000", "198.51.100.7, not-an-ip, 127.0.0.2", "", 400},
	}
	fake := newFake()
	fake.policies["per-ip"] = contract.Policy{Name: "per-ip", KeyTemplate: "{user}", Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 1000, Period: 3600e9, Burst: 1000}}
	h := newTestAPI(fake)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newNodeRequest(http.MethodGet, "/v1/forward-auth?policy=per-ip&dim.user=client_ip", nil)
			req.RemoteAddr = tt.peer
			if tt.forwardedFor != "" {
				req.Header.Set("X-Forwarded-For", tt.forwardedFor)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			validateAgainstOpenAPI(t, req, nil, rec)
			if rec.Code != tt.wantStatus {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tt.wantStatus)
			}
			if tt.wantStatus != 200 {
				body := decodeBody(t, rec)
				if body["field"] != "dim.user" || !strings.Contains(body["error"].(string), "X-Forwarded-For") {
					t.Fatalf("answer %v, want one naming dim.user and X-Forwarded-For", body)
				}
				return
			}
			fake.mu.Lock()
			got := fake.last.Checks[0].Dimensions[0].Value
			fake.mu.Unlock()
			if got != tt.wantKey {
				t.Fatalf("client_ip %q, want %q", got, tt.wantKey)
			}
		})
	}
}
