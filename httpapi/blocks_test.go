package httpapi

import (
	"strings"
	"testing"
)

// TestABlocksReasonIsVisibleText puts blocks whose reasons hide characters
// (a right-to-left override, a zero width space, written as JSON escapes and
// as raw UTF-8): each is a 400 naming reason, and nothing is blocked; a
// reason in another script is kept as it was sent.
func TestABlocksReasonIsVisibleText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		wantStatus int
	}{
		{"a right-to-left override", `{"ttl":"1h","reason":"abuse\u202e"}`, 400},
		{"a zero width space", `{"ttl":"1h","reason":"ab\u200buse"}`, 400},
		{"a raw right-to-left isolate", "{\"ttl\":\"1h\",\"reason\":\"a\u2067b\"}", 400},
		{"a reason in another script", `{"ttl":"1h","reason":"trop de requêtes"}`, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake()
			rec := do(t, newTestAPI(fake), "PUT", "/v1/blocks/k", tt.body)
			if rec.Code != tt.wantStatus {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tt.wantStatus)
			}
			if tt.wantStatus == 200 {
				if fake.blocks["k"].Reason != "trop de requêtes" {
					t.Fatalf("blocked with %+v", fake.blocks["k"])
				}
				return
			}
			if body := decodeBody(t, rec); body["field"] != "reason" || !strings.Contains(body["error"].(string), "visible text") {
				t.Fatalf("%v, want a 400 naming reason", body)
			}
			if len(fake.blocks) != 0 {
				t.Fatalf("a refused block was put: %v", fake.blocks)
			}
		})
	}
}
