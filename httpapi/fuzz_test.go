package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequestBodies: whatever body reaches /v1/allow, /v1/allow/batch,
// /v1/settle or PUT /v1/policies/{name}, the API answers with a status of the contract and
// a JSON body, and never panics.
func FuzzRequestBodies(f *testing.F) {
	for _, seed := range []string{
		`{"key":"api-key:abc123","limit":{"algorithm":"token_bucket","rate":100,"period":"1m","burst":100},"cost":1}`,
		`{"checks":[{"key":"client:42","limit":{"rate":10,"period":"1s"}},{"key":"global","policy":"g","cost":0}]}`,
		`{"policy":"routes","dimensions":{"api_key":"abc","route":"/export"},"request_id":"r-1"}`,
		`{"requests":[{"key":"a","limit":{"rate":1}},{"key":"b","limit":{"rate":0}}]}`,
		`{"limit":{"rate":100,"period":"1m"},"overrides":{"vip":{"rate":1000}},"key_template":"{user}","shadow":true}`,
		`{"key":"k","limit":{"rate":100},"cost":40,"settle":{"ttl":"2m"}}`, `{"settlement_id":"s1","cost":12}`, `{"settlement_id":"s1","cost":-1}`,
		`{"limit":{"rate":100,"period":"1m"},"max_debt":10,"penalty":{"denials":3,"within":"1m","block_for":"10m"}}`,
		`{"key":"k","limit":{"rate":1e3}}`, `{"key":"k","limit":{"rate":10.5}}`, `[]`, `null`, `{"key":"\u0000"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fake := newFake()
		fake.policies["g"] = testPolicy("g")
		api := newTestAPI(fake)
		for _, target := range []struct{ method, path string }{
			{"POST", "/v1/allow"}, {"POST", "/v1/allow/batch"}, {"POST", "/v1/settle"}, {"PUT", "/v1/policies/fuzz"},
		} {
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, newNodeRequest(target.method, target.path, strings.NewReader(body)))
			switch rec.Code {
			case 200, 400, 404, 409, 413, 429:
			default:
				t.Fatalf("%s %s answered %d to %q", target.method, target.path, rec.Code, body)
			}
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s %s answered a body that is not JSON: %q", target.method, target.path, rec.Body)
			}
		}
	})
}
