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

// TestOpenAPIValidatesInjectedFailures checks against api/openapi.yaml the
// answers that a real node cannot be made to give on demand (an unknown
// outcome, a bug, a node not ready) from a fake backend that returns them.
// Everything else is TestOpenAPIValidatesRealTraffic's, on a real node.
func TestOpenAPIValidatesInjectedFailures(t *testing.T) {
	t.Parallel()
	fake := newFake()
	h := newTestAPI(fake)
	setErr := func(err error) func(*fakeLimiter) { return func(f *fakeLimiter) { f.err = err } }
	steps := []struct {
		name               string
		before             func(*fakeLimiter) // runs under the fake's lock
		method, path, body string
		want               int
	}{
		{"an outcome unknown", setErr(contract.ErrOutcomeUnknown), "POST", "/v1/allow", `{"key":"k","limit":{"rate":5},"request_id":"r-9"}`, 503},
		{"a bug", setErr(io.ErrClosedPipe), "POST", "/v1/allow", `{"key":"k","limit":{"rate":5}}`, 500},
		{"a bug in a join", setErr(io.ErrClosedPipe), "POST", "/v1/cluster/join", `{"id":"n4","raft_addr":"127.0.0.1:8004"}`, 500},
		{"not ready", func(f *fakeLimiter) { f.err, f.ready = nil, false }, "GET", "/readyz", "", 503},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			fake.mu.Lock()
			st.before(fake)
			fake.mu.Unlock()
			rec := serveValidated(t, h, st.method, st.path, st.body)
			if rec.Code != st.want {
				t.Errorf("%s %s answered %d, want %d: %.300s", st.method, st.path, rec.Code, st.want, rec.Body)
			}
		})
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
