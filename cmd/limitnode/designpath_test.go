package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTheDesignPathAnswersAsV1Allow: POST /allow, the path the design
// gives services, is answered as POST /v1/allow is, over HTTP by a node
// with tokens on: a decision and a denial, a bad body naming its field, a
// body over the bound, no token, an unknown token, a token without the
// decide role, a page of another site, another method. Each pair of
// requests goes to a key of its own, so that both paths start from the
// same state.
func TestTheDesignPathAnswersAsV1Allow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	decideToken, decideEntry := newToken(t, "svc", "decide")
	readToken, readEntry := newToken(t, "dash", "read")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, decideEntry, readEntry)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"), "-auth", tokens}, nil)

	oneAMinute := func(key string) string { return `{"key":"` + key + `","limit":{"rate":1,"period":"1m"}}` }
	tests := []struct {
		name    string
		method  string
		body    func(key string) string
		token   string
		header  map[string]string
		repeat  int // requests sent to each path before the one compared
		want    int
		wantIn  string
		headers []string // compared besides the body
	}{
		{name: "an allowed decision", body: oneAMinute, token: decideToken, want: 200,
			headers: []string{"Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Policy", "Content-Type"}},
		{name: "a denial", body: oneAMinute, token: decideToken, repeat: 1, want: 429, wantIn: `"allowed":false`,
			headers: []string{"Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Policy"}},
		{name: "a bad body names its field", body: func(key string) string { return `{"key":"` + key + `","limit":{"rate":0,"period":"1m"}}` },
			token: decideToken, want: 400, wantIn: `"field":"limit.rate"`},
		{name: "a body over the bound", body: func(key string) string { return `{"key":"` + key + strings.Repeat(" ", 70<<10) + `"}` },
			token: decideToken, want: 413, wantIn: "larger than 65536 bytes"},
		{name: "no token", body: oneAMinute, want: 401, headers: []string{"Www-Authenticate"}},
		{name: "an unknown token", body: oneAMinute, token: "ln_not-a-known-token", want: 401, headers: []string{"Www-Authenticate"}},
		{name: "a token without the decide role", body: oneAMinute, token: readToken, want: 403, wantIn: "decide role"},
		{name: "a page of another site", body: oneAMinute, token: decideToken, header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
			want: 403, wantIn: "cross_origin"},
		{name: "another method", method: http.MethodGet, body: func(string) string { return "" }, token: decideToken, want: 405, headers: []string{"Allow"}},
	}
	for i, tt := range tests {
		method := cmp.Or(tt.method, http.MethodPost)
		answers := map[string]answer{}
		for _, path := range []string{"/v1/allow", "/allow"} {
			key := fmt.Sprintf("design-%d%s", i, path)
			for range tt.repeat + 1 {
				answers[path] = ask(t, ctx, method, "http://"+n.addr+path, tt.body(key), tt.token, tt.header)
			}
			// What names the path or the key may differ; nothing else.
			a := answers[path]
			a.body = strings.ReplaceAll(strings.ReplaceAll(a.body, key, "KEY"), path, "PATH")
			answers[path] = a
		}
		v1, design := answers["/v1/allow"], answers["/allow"]
		if v1.status != tt.want || !strings.Contains(v1.body, tt.wantIn) {
			t.Errorf("%s: POST /v1/allow answered %d %s, want %d with %q", tt.name, v1.status, v1.body, tt.want, tt.wantIn)
		}
		if design.status != v1.status || design.body != v1.body {
			t.Errorf("%s: /allow answered %d %s\n/v1/allow answered %d %s", tt.name, design.status, design.body, v1.status, v1.body)
		}
		for _, h := range tt.headers {
			if design.header.Get(h) != v1.header.Get(h) || v1.header.Get(h) == "" {
				t.Errorf("%s: %s: %q on /allow, %q on /v1/allow", tt.name, h, design.header.Get(h), v1.header.Get(h))
			}
		}
	}
}

// answer is what a node answered: status, headers, and the body without
// its timings (reset_after_ms and retry_after_ms move between two calls).
type answer struct {
	status int
	header http.Header
	body   string
}

// ask sends one request with a bearer token (none when empty) and headers.
func ask(t *testing.T, ctx context.Context, method, url, body, token string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: timings.ReplaceAllString(string(data), `"$1":T`)}
}

var timings = regexp.MustCompile(`"(reset_after_ms|retry_after_ms)":\d+`)

// TestAFieldIsNamedByItsPath: a field unknown or of the wrong type, inside
// nested objects and arrays, is named by its whole JSON path (limit.unit,
// checks[1].limit.unit), in the message and in "field", over HTTP.
func TestAFieldIsNamedByItsPath(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir()}, nil)
	tests := []struct {
		method, path, body, want string
	}{
		{"POST", "/v1/allow", `{"key":"a","limit":{"rate":10,"period":"1m","unit":"minute"}}`, `{"error":"unknown field \"limit.unit\"","code":"invalid_argument","field":"limit.unit"}`},
		{"POST", "/v1/allow", `{"checks":[{"key":"a","limit":{"rate":10}},{"key":"b","limit":{"rate":10,"unit":"minute"}}]}`, `"field":"checks[1].limit.unit"`},
		{"POST", "/v1/allow", `{"checks":[{"key":"a","limit":{"rate":10}},{"key":"b","limit":{"rate":"10"}}]}`, `{"error":"checks[1].limit.rate must be an integer, not a JSON string","code":"invalid_argument","field":"checks[1].limit.rate"}`},
		{"POST", "/v1/allow/batch", `{"requests":[{"key":"a","limit":{"rate":10,"local_shares":{"ttl":"1s","units":3}}}]}`, `"field":"requests[0].limit.local_shares.units"`},
		{"PUT", "/v1/policies/p", `{"limit":{"rate":10},"overrides":{"vip":{"rate":100,"unit":"minute"}}}`, `"field":"overrides.vip.unit"`},
	}
	for _, tt := range tests {
		a := ask(t, ctx, tt.method, "http://"+n.addr+tt.path, tt.body, "", nil)
		if a.status != http.StatusBadRequest || !strings.Contains(a.body, tt.want) {
			t.Errorf("%s %s %s: %d %s; want 400 with %s", tt.method, tt.path, tt.body, a.status, a.body, tt.want)
		}
	}
}
