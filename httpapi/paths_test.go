package httpapi

import (
	"strings"
	"testing"
)

// TestEveryRouteReadsItsPathSegmentsAsJSONStrings sends each route that
// names something in its path a segment that is not valid UTF-8 (%ff) and
// one that holds U+FFFD, the character a JSON body's invalid bytes become:
// each is a 400 naming the segment, whatever the route, so that no route
// acts on a key another route could not name. A valid UTF-8 segment
// reaches the backend byte for byte.
func TestEveryRouteReadsItsPathSegmentsAsJSONStrings(t *testing.T) {
	t.Parallel()
	routes := []struct {
		method, path, segment, body string
	}{
		{"GET", "/v1/keys/%s", "key", ""},
		{"DELETE", "/v1/keys/%s", "key", ""},
		{"PUT", "/v1/blocks/%s", "key", `{"ttl":"1h","reason":"abuse"}`},
		{"DELETE", "/v1/blocks/%s", "key", ""},
		{"GET", "/v1/policies/%s", "name", ""},
		{"PUT", "/v1/policies/%s", "name", `{"limit":{"rate":1,"period":"1h"}}`},
		{"DELETE", "/v1/policies/%s", "name", ""},
		{"GET", "/v1/rls/domains/%s", "domain", ""},
		{"DELETE", "/v1/rls/domains/%s", "domain", ""},
		{"DELETE", "/v1/leases/%s", "id", ""},
		{"POST", "/v1/leases/%s/renew", "id", `{"ttl":"10s"}`},
		{"DELETE", "/v1/cluster/nodes/%s", "id", ""},
	}
	h := newTestAPI(newFake())
	for _, r := range routes {
		for _, bad := range []string{"%ff", "a%EF%BF%BDb"} {
			t.Run(r.method+" "+strings.Replace(r.path, "%s", bad, 1), func(t *testing.T) {
				rec := do(t, h, r.method, strings.Replace(r.path, "%s", bad, 1), r.body)
				body := decodeBody(t, rec)
				if rec.Code != 400 || body["field"] != r.segment || !strings.Contains(body["error"].(string), "valid UTF-8") {
					t.Fatalf("%d %v, want a 400 naming %s as not valid UTF-8", rec.Code, body, r.segment)
				}
			})
		}
	}
	t.Run("a valid UTF-8 key reaches the backend byte for byte", func(t *testing.T) {
		fake := newFake()
		h := newTestAPI(fake)
		if rec := do(t, h, "PUT", "/v1/blocks/caf%C3%A9", `{"ttl":"1h"}`); rec.Code != 200 {
			t.Fatalf("PUT: %d %s", rec.Code, rec.Body)
		}
		if _, ok := fake.blocks["café"]; !ok || len(fake.blocks) != 1 {
			t.Fatalf("blocked %v, want café", fake.blocks)
		}
		if rec := do(t, h, "DELETE", "/v1/blocks/caf%C3%A9", ""); rec.Code != 200 {
			t.Fatalf("DELETE: %d %s", rec.Code, rec.Body)
		}
	})
}
