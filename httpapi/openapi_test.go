package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/limitnode/limitnode/api"
	"github.com/limitnode/limitnode/contract"
)

// openAPISpec is api/openapi.yaml loaded and validated, with a router that
// finds the operation of a request.
type openAPISpec struct {
	doc    *openapi3.T
	router routers.Router
}

// loadOpenAPISpec loads the document once for every test of the package.
// It loads the JSON form, which is what the server hands to clients.
var loadOpenAPISpec = sync.OnceValues(func() (*openAPISpec, error) {
	// The status page is HTML: validated as the string the document
	// says it is.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	data, err := api.JSON()
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("load api/openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("api/openapi.yaml is not a valid OpenAPI document: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route api/openapi.yaml: %w", err)
	}
	return &openAPISpec{doc: doc, router: router}, nil
})

func openAPI(t testing.TB) *openAPISpec {
	t.Helper()
	spec, err := loadOpenAPISpec()
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// operation names a request's documented operation ("POST /v1/allow"), or
// returns "" when the document has no operation for it.
func (s *openAPISpec) operation(req *http.Request) string {
	route, _, err := s.router.FindRoute(req)
	if err != nil {
		return ""
	}
	return route.Method + " " + route.Path
}

// validateAgainstOpenAPI checks one exchange with the handler against
// api/openapi.yaml: the response always, the request when the server took
// it as well-formed. reqBody is the body req was sent with (the handler has
// read req.Body).
func validateAgainstOpenAPI(t testing.TB, req *http.Request, reqBody []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	if err := checkAgainstOpenAPI(openAPI(t), req, reqBody, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
		t.Errorf("%s %s answered %d, against api/openapi.yaml: %v\nrequest body: %.300s\nresponse body: %.300s",
			req.Method, req.URL.Path, rec.Code, err, reqBody, rec.Body.Bytes())
	}
}

// checkAgainstOpenAPI does the work of validateAgainstOpenAPI on the parts
// of an exchange, so that tests can also feed it exchanges that break the
// contract.
//
//   - A path the document does not list must have reached the catch-all:
//     a 404 whose body is the document's not_found error.
//   - A method the path does not serve must be a 405; it is checked against
//     the 405 response that every operation of the path documents.
//   - Otherwise the response must be one the operation documents (status,
//     headers and body). The request is checked too unless the server
//     refused it as malformed (400, or 413 for a body too large to read):
//     those requests are meant to break the contract.
func checkAgainstOpenAPI(s *openAPISpec, req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	ctx := context.Background()
	r := req.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	respOpts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}

	route, pathParams, err := s.router.FindRoute(r)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return checkCatchAll(s, status, header, body)
	case errors.Is(err, routers.ErrMethodNotAllowed):
		if status != http.StatusMethodNotAllowed {
			return fmt.Errorf("the document has no %s operation on this path, but the server answered %d", req.Method, status)
		}
		// Any operation of the path describes its 405.
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			probe := r.Clone(ctx)
			probe.Method = m
			if route, pathParams, err = s.router.FindRoute(probe); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("no operation of this path documents its 405: %w", err)
		}
	case err != nil:
		return fmt.Errorf("find the operation: %w", err)
	case status == http.StatusMethodNotAllowed:
		return fmt.Errorf("the document lists %s %s, but the server answered 405", route.Method, route.Path)
	}

	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: pathParams, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	// A request refused before its body was read (401, 403) or because of
	// it (400, 413, 415) need not match the document; its answer must.
	bodyRefused := status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge ||
		status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusUnsupportedMediaType
	if route.Method == req.Method && !bodyRefused {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			return fmt.Errorf("request: %w", err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header, Options: respOpts}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	return nil
}

// checkCatchAll checks the answer to a path the document does not list.
func checkCatchAll(s *openAPISpec, status int, header http.Header, body []byte) error {
	if status != http.StatusNotFound {
		return fmt.Errorf("the document lists no such path, but the server answered %d", status)
	}
	notFound := s.doc.Components.Responses["NotFound"]
	if notFound == nil || notFound.Value == nil {
		return errors.New("the document has no NotFound response")
	}
	media := notFound.Value.Content.Get(header.Get("Content-Type"))
	if media == nil {
		return fmt.Errorf("404 with Content-Type %q", header.Get("Content-Type"))
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("404 body is not JSON: %w", err)
	}
	if err := media.Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()); err != nil {
		return fmt.Errorf("404 body: %w", err)
	}
	return nil
}

// newNodeRequest is a request for target as a program sends it to a node
// it names by its address (httptest's own default Host, example.com, is a
// name, which a node without tokens refuses: see refuseCrossSite).
func newNodeRequest(method, target string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, target, body)
	req.Host = "127.0.0.1:7070"
	return req
}

// newOpenAPIRequest builds a request as a client following the document
// sends it: a JSON body says so in Content-Type (the server itself reads
// the body as JSON whatever the Content-Type).
func newOpenAPIRequest(method, path, body string) *http.Request {
	req := newNodeRequest(method, path, strings.NewReader(body))
	switch {
	case body != "" && path == "/v1/snapshot":
		req.Header.Set("Content-Type", "application/octet-stream") // a backup file
	case body != "" && strings.HasPrefix(path, "/v1/rls/") && !strings.HasPrefix(body, "{"):
		req.Header.Set("Content-Type", "application/yaml") // envoyproxy/ratelimit's format
	case body != "":
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// serveValidated sends one request to h and validates the exchange against
// the document.
func serveValidated(t testing.TB, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := newOpenAPIRequest(method, path, body)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	validateAgainstOpenAPI(t, req, []byte(body), rec)
	return rec
}

// isCatchAll reports whether rec is the answer of the catch-all handler,
// which serves every path the server does not register.
func isCatchAll(rec *httptest.ResponseRecorder) bool {
	var e struct{ Error, Code string }
	return rec.Code == http.StatusNotFound && json.Unmarshal(rec.Body.Bytes(), &e) == nil &&
		e.Code == "not_found" && strings.HasPrefix(e.Error, "no such endpoint: ")
}

var pathParam = regexp.MustCompile(`\{[^/{}]+\}`)

// TestOpenAPIDocumentListsEveryRoute checks that the document is valid and
// that its operations are exactly the server's: every documented operation
// is served, and on every documented path every other method is a 405
// whose Allow header lists exactly the documented methods (and HEAD with
// GET). A path the server registers and the document lacks entirely is not
// caught here; the handler's own tests and review have to catch that.
func TestOpenAPIDocumentListsEveryRoute(t *testing.T) {
	t.Parallel()
	spec := openAPI(t)
	if err := spec.doc.Validate(context.Background()); err != nil {
		t.Fatalf("invalid document: %v", err)
	}
	if !spec.doc.IsOpenAPI31OrLater() {
		t.Fatalf("the document is OpenAPI %s, want 3.1", spec.doc.OpenAPI)
	}
	h := New(newFake(), Options{Logger: slog.New(slog.DiscardHandler)})
	for _, path := range h.routes {
		if spec.doc.Paths.Value(path) == nil {
			t.Errorf("the server serves %s, which api/openapi.yaml does not document", path)
		}
	}
	probeMethods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions}
	for _, path := range slices.Sorted(maps.Keys(spec.doc.Paths.Map())) {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			documented := spec.doc.Paths.Value(path).Operations()
			served := map[string]bool{}
			for m := range documented {
				served[m] = true
			}
			if served[http.MethodGet] {
				served[http.MethodHead] = true
			}
			allow := strings.Join(slices.Sorted(maps.Keys(served)), ", ")
			concrete := pathParam.ReplaceAllString(path, "x")
			for _, method := range probeMethods {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, newNodeRequest(method, concrete, nil))
				switch {
				case served[method]:
					if rec.Code == http.StatusMethodNotAllowed || isCatchAll(rec) {
						t.Errorf("%s %s is documented but answered %d: %s", method, concrete, rec.Code, rec.Body)
					}
				default:
					if rec.Code != http.StatusMethodNotAllowed {
						t.Errorf("%s %s is not documented but answered %d, not 405: %s", method, concrete, rec.Code, rec.Body)
					} else if got := rec.Header().Get("Allow"); got != allow {
						t.Errorf("%s %s: Allow %q, but the document lists %q", method, concrete, got, allow)
					}
				}
			}
		})
	}
}

// TestOpenAPIValidatesRealTraffic drives representative requests, good and
// bad, through the handler and validates every exchange against the
// document; then checks that every documented operation was exercised.
func TestOpenAPIValidatesRealTraffic(t *testing.T) {
	t.Parallel()
	spec := openAPI(t)
	fake := newFake()
	h := newTestAPI(fake)
	setErr := func(err error) func(*fakeLimiter) { return func(f *fakeLimiter) { f.err = err } }

	const limit2PerMinute = `{"key":"k","limit":{"rate":2,"period":"1m"},"request_id":"r-1"}`
	steps := []struct {
		name               string
		before             func(*fakeLimiter) // runs under the fake's lock
		method, path, body string
		want               int
	}{
		{"allowed", nil, "POST", "/v1/allow", `{"key":"k","limit":{"rate":2,"period":"1m"}}`, 200},
		{"allowed with every limit field", nil, "POST", "/v1/allow", `{"key":"k2","limit":{"algorithm":"gcra","rate":5,"period":"1s","burst":2},"cost":2,"request_id":"r-2"}`, 200},
		{"a reservation", nil, "POST", "/v1/allow", `{"key":"r","limit":{"algorithm":"gcra","rate":1,"period":"1s","burst":1},"cost":1}`, 200},
		{"a reservation within max_wait", nil, "POST", "/v1/allow", `{"key":"r","limit":{"algorithm":"gcra","rate":1,"period":"1s","burst":1},"max_wait":"2s"}`, 200},
		{"a reservation held", nil, "POST", "/v1/allow", `{"key":"r2","limit":{"rate":1000,"period":"1s","burst":1},"max_wait":"50ms","hold":true}`, 200},
		{"a hold's first call", nil, "POST", "/v1/allow", `{"key":"r3","limit":{"algorithm":"gcra","rate":1,"period":"6s","burst":1},"max_wait":"10s","hold":true}`, 200},
		{"a hold further away than the node holds is denied", nil, "POST", "/v1/allow", `{"key":"r3","limit":{"algorithm":"gcra","rate":1,"period":"6s","burst":1},"max_wait":"10s","hold":true}`, 429},
		{"max_wait on a window", nil, "POST", "/v1/allow", `{"key":"w","limit":{"algorithm":"fixed_window","rate":1},"max_wait":"1s"}`, 400},
		{"allowed, a window", nil, "POST", "/v1/allow", `{"key":"k3","limit":{"algorithm":"sliding_window_log","rate":10000,"period":"1h"},"cost":0}`, 200},
		{"allowed, the last unit", nil, "POST", "/v1/allow", limit2PerMinute, 200},
		{"denied", nil, "POST", "/v1/allow", limit2PerMinute, 429},
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
		{"allow by policy and key", nil, "POST", "/v1/allow", `{"policy":"per-user","key":"u1","cost":3}`, 200},
		{"allow by policy and dimensions", nil, "POST", "/v1/allow", `{"policy":"per-user","dimensions":{"user":"u2"}}`, 200},
		{"forward-auth by method", nil, "GET", "/v1/forward-auth?policy=per-user&dim.user=method", "", 200},
		{"forward-auth by client address", nil, "POST", "/v1/forward-auth?policy=per-user&dim.user=client_ip", "", 200},
		{"forward-auth by host", nil, "PUT", "/v1/forward-auth?policy=per-user&dim.user=host", "", 200},
		{"forward-auth by a header", nil, "PATCH", "/v1/forward-auth?policy=per-user&dim.user=header:Host", "", 200},
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
		{"renew a lease", nil, "POST", "/v1/leases/lease-1/renew", `{"ttl":"1m"}`, 200},
		{"renew a lease with a bad ttl", nil, "POST", "/v1/leases/lease-1/renew", `{"ttl":"forever"}`, 400},
		{"release a lease", nil, "DELETE", "/v1/leases/lease-1", "", 200},
		{"renew a lease not held", nil, "POST", "/v1/leases/lease-1/renew", `{"ttl":"1m"}`, 404},
		{"release it again", nil, "DELETE", "/v1/leases/lease-1", "", 404},
		{"cluster status", nil, "GET", "/v1/cluster", "", 200},
		{"join", nil, "POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"127.0.0.1:8002","http_addr":"127.0.0.1:7002"}`, 200},
		{"join without an HTTP address", nil, "POST", "/v1/cluster/join", `{"id":"n3","raft_addr":"127.0.0.1:8003"}`, 200},
		{"remove a member", nil, "DELETE", "/v1/cluster/nodes/n2", "", 200},
		{"remove a member that is not there", nil, "DELETE", "/v1/cluster/nodes/ghost", "", 404},
		{"the OpenAPI document", nil, "GET", "/v1/openapi.json", "", 200},
		{"a consistency check", nil, "POST", "/v1/cluster/consistency", "", 200},
		{"a hand-over", nil, "POST", "/v1/cluster/transfer-leadership", `{"to":"n2"}`, 200},
		{"a hand-over to no one in particular", nil, "POST", "/v1/cluster/transfer-leadership", "", 200},
		{"a hand-over to a stranger", nil, "POST", "/v1/cluster/transfer-leadership", `{"to":"ghost"}`, 404},
		{"a backup", nil, "GET", "/v1/snapshot", "", 200},
		{"a restore", nil, "POST", "/v1/snapshot", "a backup file", 200},
		{"a restore of a foreign file", nil, "POST", "/v1/snapshot", "not one", 400},
		{"a restore on a follower", func(f *fakeLimiter) { f.notLeader = true }, "POST", "/v1/snapshot", "a backup file", 307},
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
		{"settle with less", nil, "POST", "/v1/settle", `{"settlement_id":"s1","cost":1200}`, 200},
		{"settle again, a retry", nil, "POST", "/v1/settle", `{"settlement_id":"s1","cost":1200}`, 200},
		{"settle again with another cost", nil, "POST", "/v1/settle", `{"settlement_id":"s1","cost":1300}`, 409},
		{"settle with more", nil, "POST", "/v1/settle", `{"settlement_id":"s2","cost":5000}`, 200},
		{"settle an unknown reservation", nil, "POST", "/v1/settle", `{"settlement_id":"s99","cost":1}`, 404},
		{"settle without a cost", nil, "POST", "/v1/settle", `{"settlement_id":"s1"}`, 400},
		{"settle with a negative cost", nil, "POST", "/v1/settle", `{"settlement_id":"s1","cost":-1}`, 400},
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
		{"a blocked key of a policy", nil, "POST", "/v1/allow", `{"policy":"per-user","key":"u1"}`, 429},
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
		{"give a share back", nil, "POST", "/v1/shares/return", `{"key":"shared","limit":{"rate":100},"id":"1.000102030405060708090a0b0c0d0e0f","unspent":4}`, 200},
		{"give a share back by its bare number", nil, "POST", "/v1/shares/return", `{"key":"shared","limit":{"rate":100},"id":"1","unspent":4}`, 400},
		{"give a share back without its id", nil, "POST", "/v1/shares/return", `{"key":"shared","limit":{"rate":100},"unspent":4}`, 400},
		{"no leader", setErr(contract.ErrNoLeader), "POST", "/v1/allow", `{"key":"k","limit":{"rate":5}}`, 503},
		{"no leader for a batch", setErr(contract.ErrNoLeader), "POST", "/v1/allow/batch", `{"requests":[{"key":"k","limit":{"rate":5}}]}`, 503},
		{"no leader for a policy", setErr(contract.ErrNoLeader), "PUT", "/v1/policies/p", `{"limit":{"rate":1}}`, 503},
		{"no leader for a join", setErr(contract.ErrNoLeader), "POST", "/v1/cluster/join", `{"id":"n4","raft_addr":"127.0.0.1:8004"}`, 503},
		{"an outcome unknown", setErr(contract.ErrOutcomeUnknown), "POST", "/v1/allow", `{"key":"k","limit":{"rate":5},"request_id":"r-9"}`, 503},
		{"a bug", setErr(io.ErrClosedPipe), "POST", "/v1/allow", `{"key":"k","limit":{"rate":5}}`, 500},
		{"a bug in a join", setErr(io.ErrClosedPipe), "POST", "/v1/cluster/join", `{"id":"n4","raft_addr":"127.0.0.1:8004"}`, 500},
		{"list the keys", nil, "GET", "/v1/keys?limit=2", "", 200},
		{"list the keys with a prefix", nil, "GET", "/v1/keys?prefix=k&after=k&limit=100", "", 200},
		{"a page of keys too large", nil, "GET", "/v1/keys?limit=5000", "", 400},
		{"get a key", nil, "GET", "/v1/keys/k2", "", 200},
		{"get a key without state", nil, "GET", "/v1/keys/nobody", "", 404},
		{"reset a key", nil, "DELETE", "/v1/keys/k2", "", 200},
		{"reset a key without state", nil, "DELETE", "/v1/keys/k2", "", 404},
		{"not ready", func(f *fakeLimiter) { f.err, f.ready = nil, false }, "GET", "/readyz", "", 503},
	}

	exercised := map[string]bool{}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.before != nil {
				fake.mu.Lock()
				st.before(fake)
				fake.mu.Unlock()
			}
			rec := serveValidated(t, h, st.method, st.path, st.body)
			if rec.Code != st.want {
				t.Errorf("%s %s answered %d, want %d: %.300s", st.method, st.path, rec.Code, st.want, rec.Body)
			}
			if op := spec.operation(newOpenAPIRequest(st.method, st.path, "")); op != "" {
				exercised[op] = true
			}
		})
	}
	for path, item := range spec.doc.Paths.Map() {
		for method := range item.Operations() {
			if op := method + " " + path; !exercised[op] {
				t.Errorf("no step exercises %s", op)
			}
		}
	}
}

// TestOpenAPIValidationCatchesViolations feeds checkAgainstOpenAPI
// exchanges that break the contract, so that a validator that accepted
// anything (a schema keyword kin-openapi ignored, say) cannot pass
// TestOpenAPIValidatesRealTraffic unnoticed.
func TestOpenAPIValidationCatchesViolations(t *testing.T) {
	t.Parallel()
	spec := openAPI(t)
	jsonType := http.Header{"Content-Type": {"application/json"}}
	withHeaders := func(kv ...string) http.Header {
		h := jsonType.Clone()
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	rateLimited := []string{"RateLimit-Limit", "2", "RateLimit-Remaining", "1", "RateLimit-Reset", "30",
		"RateLimit-Policy", `"default";q=2;w=60`, "RateLimit", `"default";r=1;t=30`, "X-Limitnode-Decided-At", "1700000000000000000"}
	const (
		goodAllow    = `{"key":"k","limit":{"rate":2,"period":"1m"}}`
		allowedBody  = `{"allowed":true,"limit":2,"remaining":1,"reset_after_ms":30000,"retry_after_ms":0}`
		deniedBody   = `{"allowed":false,"limit":2,"remaining":0,"reset_after_ms":60000,"retry_after_ms":30000}`
		policyFields = `"name":"p","limit":{"algorithm":"token_bucket","rate":1,"period":"1s","burst":1},"shadow":false`
	)
	tests := []struct {
		name               string
		method, path, body string
		status             int
		header             http.Header
		respBody           string
		conforms           bool // the one exchange that conforms, to show the others fail for their fault
	}{
		{"a conforming answer", "POST", "/v1/allow", goodAllow, 200, withHeaders(rateLimited...), allowedBody, true},
		{"a 200 without remaining", "POST", "/v1/allow", goodAllow, 200, withHeaders(rateLimited...),
			`{"allowed":true,"limit":2,"reset_after_ms":30000,"retry_after_ms":0}`, false},
		{"a 200 with an extra field", "POST", "/v1/allow", goodAllow, 200, withHeaders(rateLimited...),
			`{"allowed":true,"limit":2,"remaining":1,"reset_after_ms":30000,"retry_after_ms":0,"extra":1}`, false},
		{"a 200 that denies", "POST", "/v1/allow", goodAllow, 200, withHeaders(rateLimited...), deniedBody, false},
		{"a fractional limit", "POST", "/v1/allow", goodAllow, 200, withHeaders(rateLimited...),
			`{"allowed":true,"limit":2.5,"remaining":1,"reset_after_ms":30000,"retry_after_ms":0}`, false},
		{"a 200 without RateLimit-Policy", "POST", "/v1/allow", goodAllow, 200,
			withHeaders(rateLimited[:6]...), allowedBody, false},
		{"a malformed RateLimit header", "POST", "/v1/allow", goodAllow, 200,
			withHeaders(append(slices.Clone(rateLimited), "RateLimit", "r=1")...), allowedBody, false},
		{"a 429 without Retry-After", "POST", "/v1/allow", goodAllow, 429, withHeaders(rateLimited...), deniedBody, false},
		{"a Limitnode-Denied-By that is not a structured field", "POST", "/v1/allow", goodAllow, 429,
			withHeaders(append(slices.Clone(rateLimited), "Retry-After", "30", "Limitnode-Denied-By", "per-user, check 0")...), deniedBody, false},
		{"a status the operation does not document", "POST", "/v1/allow", goodAllow, 418, jsonType, `{"error":"teapot","code":"internal"}`, false},
		{"an error with an unknown code", "POST", "/v1/allow", goodAllow, 500, jsonType, `{"error":"x","code":"oops"}`, false},
		{"a 503 with the code of a 500", "POST", "/v1/allow", goodAllow, 503, withHeaders("Retry-After", "1"), `{"error":"x","code":"internal"}`, false},
		{"a 503 without Retry-After", "POST", "/v1/allow", goodAllow, 503, jsonType, `{"error":"x","code":"unavailable"}`, false},
		{"an error body in text", "POST", "/v1/allow", goodAllow, 500, http.Header{"Content-Type": {"text/plain"}}, `oops`, false},

		{"a request with an unknown field", "POST", "/v1/allow", `{"key":"k","limit":{"rate":2},"colour":"red"}`, 200, withHeaders(rateLimited...), allowedBody, false},
		{"a request with a key and checks", "POST", "/v1/allow", `{"key":"k","checks":[{"key":"k","limit":{"rate":2}}]}`, 200, withHeaders(rateLimited...), allowedBody, false},
		{"a request with a limit and a policy", "POST", "/v1/allow", `{"key":"k","policy":"p","limit":{"rate":2}}`, 200, withHeaders(rateLimited...), allowedBody, false},
		{"a request with a fractional rate", "POST", "/v1/allow", `{"key":"k","limit":{"rate":2.5}}`, 200, withHeaders(rateLimited...), allowedBody, false},
		{"a window with a burst", "POST", "/v1/allow", `{"key":"k","limit":{"algorithm":"fixed_window","rate":2,"burst":2}}`, 200, withHeaders(rateLimited...), allowedBody, false},
		{"a sliding log over 10,000", "POST", "/v1/allow", `{"key":"k","limit":{"algorithm":"sliding_window_log","rate":10001}}`, 200, withHeaders(rateLimited...), allowedBody, false},
		{"a bad period", "POST", "/v1/allow", `{"key":"k","limit":{"rate":2,"period":"a minute"}}`, 200, withHeaders(rateLimited...), allowedBody, false},
		{"33 checks", "POST", "/v1/allow", `{"checks":[` + strings.TrimSuffix(strings.Repeat(`{"key":"k","limit":{"rate":1}},`, 33), ",") + `]}`, 200, withHeaders(rateLimited...), allowedBody, false},
		{"an empty dimension name", "POST", "/v1/allow", `{"policy":"p","dimensions":{"":"x"}}`, 200, withHeaders(rateLimited...), allowedBody, false},

		{"a batch item mixing a decision and an error", "POST", "/v1/allow/batch", `{"requests":[` + goodAllow + `]}`, 200, jsonType,
			`{"responses":[{"status":200,"allowed":true,"limit":2,"remaining":1,"reset_after_ms":0,"retry_after_ms":0,"code":"internal"}]}`, false},
		{"a batch error without its requests[i] field", "POST", "/v1/allow/batch", `{"requests":[` + goodAllow + `]}`, 200, jsonType,
			`{"responses":[{"status":400,"error":"x","code":"invalid_argument","field":"limit.rate"}]}`, false},
		{"a granted lease without an ID", "POST", "/v1/leases", `{"key":"k","max":1,"ttl":"1s"}`, 200, jsonType,
			`{"granted":true,"key":"k","max":1,"active":1,"expires_in_ms":1000,"retry_after_ms":0}`, false},
		{"a denied lease as a 200", "POST", "/v1/leases", `{"key":"k","max":1,"ttl":"1s"}`, 200, jsonType,
			`{"granted":false,"key":"k","max":1,"active":1,"retry_after_ms":10}`, false},
		{"a policy without shadow_denied", "GET", "/v1/policies/p", "", 200, jsonType, `{` + policyFields + `}`, false},
		{"a stored policy without its algorithm", "GET", "/v1/policies/p", "", 200, jsonType,
			`{"name":"p","limit":{"rate":1,"period":"1s","burst":1},"shadow":false,"shadow_denied":0}`, false},
		{"a PUT answer with shadow_denied", "PUT", "/v1/policies/p", `{"limit":{"rate":1}}`, 200, jsonType, `{` + policyFields + `,"shadow_denied":0}`, false},
		{"a policy name with a space", "GET", "/v1/policies/a%20b", "", 200, jsonType, `{` + policyFields + `,"shadow_denied":0}`, false},
		{"readyz not ready as a 200", "GET", "/readyz", "", 200, jsonType, `{"status":"not ready"}`, false},
		{"a 405 without Allow", "GET", "/v1/allow", "", 405, jsonType, `{"error":"x","code":"method_not_allowed"}`, false},
		{"a 405 for a documented method", "POST", "/v1/allow", goodAllow, 405, withHeaders("Allow", "POST"), `{"error":"x","code":"method_not_allowed"}`, false},
		{"an unknown path answered 200", "GET", "/v1/nothing", "", 200, jsonType, `{}`, false},
		{"an unknown path with a bad error", "GET", "/v1/nothing", "", 404, jsonType, `{"error":"x","code":"missing"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := newOpenAPIRequest(tt.method, tt.path, tt.body)
			err := checkAgainstOpenAPI(spec, req, []byte(tt.body), tt.status, tt.header, []byte(tt.respBody))
			if tt.conforms && err != nil {
				t.Fatalf("a conforming exchange failed: %v", err)
			}
			if !tt.conforms && err == nil {
				t.Fatal("the violation passed validation")
			}
			if err != nil {
				first, _, _ := strings.Cut(err.Error(), "\n")
				t.Logf("refused: %s", first)
			}
		})
	}
}

// TestOpenAPIJSONMatchesYAML checks that api.JSON is the same document as
// api.YAML, as kin-openapi reads them.
func TestOpenAPIJSONMatchesYAML(t *testing.T) {
	t.Parallel()
	js, err := api.JSON()
	if err != nil {
		t.Fatal(err)
	}
	marshal := func(data []byte) []byte {
		t.Helper()
		doc, err := openapi3.NewLoader().LoadFromData(data)
		if err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if fromJSON, fromYAML := marshal(js), marshal(api.YAML()); !bytes.Equal(fromJSON, fromYAML) {
		t.Fatalf("api.JSON and api.YAML differ:\n%s\n%s", fromJSON, fromYAML)
	}
	var generic map[string]any
	if err := json.Unmarshal(js, &generic); err != nil || generic["openapi"] != "3.1.0" {
		t.Fatalf("api.JSON: openapi %v, err %v", generic["openapi"], err)
	}
}
