package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/contract"
)

// TestBrowserWritesFromOtherOriginsAreRefused drives requests as browsers
// and programs send them: what a browser sends for a page of another
// origin, or under a host name, is refused before it can change state;
// reads, programs (no browser headers, any Content-Type), and proxies asking
// forward-auth on behalf of a browser's request are answered as before.
// Each answer is checked against api/openapi.yaml.
func TestBrowserWritesFromOtherOriginsAreRefused(t *testing.T) {
	t.Parallel()
	const allowBody = `{"key":"k","limit":{"rate":1000,"period":"1h"}}`
	tests := []struct {
		name                        string
		method, path, body, ctype   string
		host                        string
		header                      map[string]string
		wantStatus                  int
		wantCode, wantMessagePrefix string
	}{
		{name: "a page of another site is refused", method: "POST", path: "/v1/allow", body: allowBody, ctype: "text/plain",
			header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://localhost:8000"}, wantStatus: 403, wantCode: codeCrossOrigin, wantMessagePrefix: "Sec-Fetch-Site is cross-site"},
		{name: "a page of the same site on another port is refused", method: "POST", path: "/v1/allow", body: allowBody, ctype: "application/json",
			header: map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:8000"}, wantStatus: 403, wantCode: codeCrossOrigin, wantMessagePrefix: "Sec-Fetch-Site is same-site"},
		{name: "an older browser's request from another origin is refused by its Origin", method: "POST", path: "/v1/leases", body: `{"key":"l","max":1}`,
			header: map[string]string{"Origin": "http://attacker.example"}, wantStatus: 403, wantCode: codeCrossOrigin, wantMessagePrefix: "Origin http://attacker.example is not this node"},
		{name: "an opaque origin is refused", method: "POST", path: "/v1/cluster/transfer-leadership",
			header: map[string]string{"Origin": "null"}, wantStatus: 403, wantCode: codeCrossOrigin, wantMessagePrefix: "Origin null is not this node"},
		{name: "a body-less DELETE from another site is refused", method: "DELETE", path: "/v1/cluster/nodes/n3",
			header: map[string]string{"Sec-Fetch-Site": "cross-site"}, wantStatus: 403, wantCode: codeCrossOrigin},
		{name: "a restore from another site is refused", method: "POST", path: "/v1/snapshot", body: "a backup file", ctype: "application/octet-stream",
			header: map[string]string{"Sec-Fetch-Site": "cross-site"}, wantStatus: 403, wantCode: codeCrossOrigin},
		{name: "an image asking forward-auth from another site is refused", method: "GET", path: "/v1/forward-auth?policy=p&dim.user=method",
			header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "image"}, wantStatus: 403, wantCode: codeCrossOrigin},
		{name: "a preflight to forward-auth does not spend", method: "OPTIONS", path: "/v1/forward-auth?policy=p&dim.user=method",
			header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://localhost:8000", "Access-Control-Request-Method": "PUT"}, wantStatus: 403, wantCode: codeCrossOrigin},
		{name: "a same-origin page that names the node by a host name is refused", method: "POST", path: "/v1/allow", body: allowBody, ctype: "application/json",
			host: "rebound.example:7070", header: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://rebound.example:7070"}, wantStatus: 403, wantCode: codeCrossOrigin, wantMessagePrefix: "Host rebound.example:7070 is a name"},
		{name: "an older browser's same-origin request under a host name is refused", method: "POST", path: "/v1/allow", body: allowBody, ctype: "application/json",
			host: "rebound.example:7070", header: map[string]string{"Origin": "http://rebound.example:7070"}, wantStatus: 403, wantCode: codeCrossOrigin, wantMessagePrefix: "Host rebound.example:7070 is a name"},
		{name: "a same-origin page's text/plain body is refused", method: "POST", path: "/v1/allow", body: allowBody, ctype: "text/plain",
			header: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:7070"}, wantStatus: 415, wantCode: codeUnsupportedMediaType, wantMessagePrefix: `Content-Type must be application/json for a request from a browser, not "text/plain"`},
		{name: "a same-origin page's untyped backup is refused", method: "POST", path: "/v1/snapshot", body: "a backup file",
			header: map[string]string{"Sec-Fetch-Site": "same-origin"}, wantStatus: 415, wantCode: codeUnsupportedMediaType, wantMessagePrefix: "Content-Type must be application/octet-stream for a request from a browser, not none"},
		{name: "a same-origin page's JSON is answered", method: "POST", path: "/v1/allow", body: allowBody, ctype: "application/json; charset=utf-8",
			header: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:7070"}, wantStatus: 200},
		{name: "an address typed by the person is answered", method: "GET", path: "/v1/forward-auth?policy=p&dim.user=method",
			host: "localhost:7070", header: map[string]string{"Sec-Fetch-Site": "none"}, wantStatus: 200},
		{name: "an older browser's request whose Origin is the Host is answered", method: "POST", path: "/v1/allow", body: allowBody, ctype: "application/json",
			host: "[::1]:7070", header: map[string]string{"Origin": "http://[::1]:7070"}, wantStatus: 200},
		{name: "a read from another site is refused without tokens", method: "GET", path: "/v1/policies",
			header: map[string]string{"Sec-Fetch-Site": "cross-site"}, wantStatus: 403, wantCode: codeCrossOrigin, wantMessagePrefix: "Sec-Fetch-Site is cross-site"},
		{name: "a proxy asking forward-auth for a browser's cross-site request is answered", method: "GET", path: "/v1/forward-auth?policy=p&dim.user=method",
			header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://elsewhere.example", "X-Forwarded-For": "203.0.113.9", "X-Forwarded-Method": "POST"}, wantStatus: 200},
		{name: "a proxy's forward-auth ask under a name is refused without tokens", method: "GET", path: "/v1/forward-auth?policy=p&dim.user=method",
			host: "app.example", header: map[string]string{"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Method": "POST"},
			wantStatus: 403, wantCode: codeCrossOrigin, wantMessagePrefix: "Host app.example is a name, and this node has no tokens"},
		{name: "a program's curl -d body is answered", method: "POST", path: "/v1/allow", body: allowBody, ctype: "application/x-www-form-urlencoded", wantStatus: 200},
		{name: "a program's text/plain body is answered", method: "POST", path: "/v1/allow", body: allowBody, ctype: "text/plain", wantStatus: 200},
		{name: "a program's untyped body under a host name is refused without tokens", method: "POST", path: "/v1/allow", body: allowBody, host: "limitnode.internal:7070",
			wantStatus: 403, wantCode: codeCrossOrigin, wantMessagePrefix: "Host limitnode.internal:7070 is a name, and this node has no tokens"},
		{name: "a program's body-less DELETE is answered", method: "DELETE", path: "/v1/cluster/nodes/n3", wantStatus: 200},
	}
	fake := newFake()
	fake.policies["p"] = contract.Policy{Name: "p", KeyTemplate: "{user}", Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 1000, Period: 3600e9, Burst: 1000}}
	h := newTestAPI(fake)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			req.Host = tt.host
			if req.Host == "" {
				req.Host = "127.0.0.1:7070"
			}
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if tt.wantStatus == http.StatusOK {
				// A program's body of any type is outside the document,
				// which describes a client that says application/json.
				if req.Header.Get("Content-Type") == "application/json" || tt.body == "" {
					validateAgainstOpenAPI(t, req, []byte(tt.body), rec)
				}
			} else {
				validateAgainstOpenAPI(t, req, []byte(tt.body), rec)
			}
			if rec.Code != tt.wantStatus {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, tt.wantStatus)
			}
			if tt.wantCode == "" {
				return
			}
			body := decodeBody(t, rec)
			if body["code"] != tt.wantCode || !strings.HasPrefix(body["error"].(string), tt.wantMessagePrefix) {
				t.Fatalf("answer %v, want code %s and a message that starts %q", body, tt.wantCode, tt.wantMessagePrefix)
			}
		})
	}
}

// TestWithoutTokensNoPageReadsAnAnswer drives every GET operation of
// api/openapi.yaml as a web page could send it to a node without tokens:
// under a name of its own that resolves to the node (DNS rebinding), where
// the browser sends neither Sec-Fetch-Site nor Origin and the request
// looks like a program's but for its Host; and marked as sent for another
// site. Each is a 403 cross_origin that says why, but /healthz and /readyz,
// which stay open; the same requests naming the node by its address get
// the route's own answer. With tokens, a name is answered (a rebound page
// has no token to send).
func TestWithoutTokensNoPageReadsAnAnswer(t *testing.T) {
	t.Parallel()
	tokens, authorizer := mustTokens(t)
	withoutTokens := newTestAPI(newFake())
	withTokens := New(newFake(), Options{Logger: slog.New(slog.DiscardHandler), Authorizer: authorizer})
	pages := []struct {
		name, host, wantPrefix string
		header                 map[string]string
	}{
		{"a rebound name", "rebound.example:7070", "Host rebound.example:7070 is a name, and this node has no tokens", nil},
		{"a rebound name without a port", "rebound.example", "Host rebound.example is a name", nil},
		{"a page of another site", "127.0.0.1:7070", "Sec-Fetch-Site is cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"a page of the same site on another port", "127.0.0.1:7070", "Sec-Fetch-Site is same-site", map[string]string{"Sec-Fetch-Site": "same-site"}},
		{"an older browser's page of another origin", "127.0.0.1:7070", "Origin http://attacker.example is not this node", map[string]string{"Origin": "http://attacker.example"}},
	}
	spec := openAPI(t)
	for _, path := range slices.Sorted(maps.Keys(spec.doc.Paths.Map())) {
		op := spec.doc.Paths.Value(path).Get
		if op == nil {
			continue
		}
		role, _ := op.Extensions["x-limitnode-role"].(string)
		target := pathParam.ReplaceAllString(path, "x")
		if path == "/v1/forward-auth" {
			target += "?policy=p&dim.user=method"
		}
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			send := func(h http.Handler, host, token string, header map[string]string) *httptest.ResponseRecorder {
				req := newNodeRequest(http.MethodGet, target, nil)
				req.Host = host
				for k, v := range header {
					req.Header.Set(k, v)
				}
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				validateAgainstOpenAPI(t, req, nil, rec)
				return rec
			}
			for _, page := range pages {
				rec := send(withoutTokens, page.host, "", page.header)
				if role == "open" {
					if rec.Code == http.StatusForbidden {
						t.Errorf("%s: %d %s, want the health check answered", page.name, rec.Code, rec.Body)
					}
					continue
				}
				body := decodeBody(t, rec)
				if rec.Code != http.StatusForbidden || body["code"] != codeCrossOrigin || !strings.HasPrefix(fmt.Sprint(body["error"]), page.wantPrefix) {
					t.Errorf("%s: %d %v, want a 403 cross_origin saying %q", page.name, rec.Code, body, page.wantPrefix)
				}
			}
			for _, host := range []string{"127.0.0.1:7070", "[::1]:7070", "localhost:7070", "app.localhost"} {
				if rec := send(withoutTokens, host, "", nil); rec.Code == http.StatusForbidden {
					t.Errorf("Host %s: %d %s, want the route's own answer", host, rec.Code, rec.Body)
				}
			}
			if rec := send(withTokens, "limitnode.internal:7070", tokens[auth.RoleAdmin], nil); rec.Code == http.StatusForbidden || rec.Code == http.StatusUnauthorized {
				t.Errorf("with tokens, a name and an admin token: %d %s, want the route's own answer", rec.Code, rec.Body)
			}
		})
	}
}

// TestARebindingPageCannotReadABackup asks a node without tokens for its
// backup over a real connection, as a page under a rebound name would
// (Host the page's name, no browser headers): the answer is a 403 whose
// JSON body names the Host, and none of the backup; the same request by
// the node's address gets the backup.
func TestARebindingPageCannotReadABackup(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newTestAPI(newFake()))
	t.Cleanup(srv.Close)
	get := func(host string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/snapshot", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	status, body := get("attacker.example:" + port)
	if status != http.StatusForbidden || !strings.Contains(body, `"code":"cross_origin"`) || !strings.Contains(body, "Host attacker.example:"+port+" is a name") {
		t.Fatalf("a rebound page's GET /v1/snapshot: %d %s, want a 403 naming the Host", status, body)
	}
	if status, body := get("127.0.0.1:" + port); status != http.StatusOK || len(body) == 0 {
		t.Fatalf("GET /v1/snapshot by the node's address: %d %q, want the backup", status, body)
	}
}
