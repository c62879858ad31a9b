package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/client/middleware"
	"github.com/limitnode/limitnode/testcluster"
)

// userKey is where the test's authentication puts the user.
type userKey struct{}

// authenticate stands for a service's own authentication middleware: it
// puts the user named by "Authorization: User <name>" in the context.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "User "); ok {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, name))
		}
		next.ServeHTTP(w, r)
	})
}

func userOf(ctx context.Context) (string, bool) {
	u, ok := ctx.Value(userKey{}).(string)
	return u, ok
}

var user = middleware.FromContext(userOf)

// clientOf returns a client of the cluster's node i.
func clientOf(c *testcluster.Cluster, i int) *client.Client {
	return client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, c.Nodes[i].URL())
}

// replica is one replica of a service: a ServeMux whose handlers sit
// behind authentication and the limiter, served on its own address.
func replica(t *testing.T, guard *client.Guard, opts middleware.Options, patterns ...string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	opts.Mux = mux
	l, err := middleware.New(guard, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range patterns {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "served "+r.Pattern) })
	}
	srv := httptest.NewServer(authenticate(l.Wrap(mux)))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, method, url string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestThreeReplicasHoldOneLimit: three replicas of a service, each with its
// own middleware and client talking to another node, hold a per-user limit
// of 100 an hour together: 300 requests of one user, spread over them and
// sent concurrently, get exactly 100 answers, not 300; another user is not
// affected.
func TestThreeReplicasHoldOneLimit(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitLeader()
	opts := middleware.Options{Default: []middleware.Check{{Key: middleware.Join(middleware.Const("per-user"), user), Limit: &client.Limit{Rate: 100, Period: time.Hour}}}}
	var replicas []*httptest.Server
	for i := range 3 {
		replicas = append(replicas, replica(t, client.NewGuard(clientOf(c, i), client.GuardOptions{}), opts, "GET /data"))
	}
	var served, denied atomic.Int64
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Go(func() {
			for i := w; i < 300; i += 12 {
				req, _ := http.NewRequest("GET", replicas[i%3].URL+"/data", nil)
				req.Header.Set("Authorization", "User alice")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					served.Add(1)
				case http.StatusTooManyRequests:
					denied.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	if served.Load() != 100 || denied.Load() != 200 {
		t.Fatalf("alice: %d served and %d denied over three replicas, want 100 and 200", served.Load(), denied.Load())
	}
	if resp := get(t, "GET", replicas[0].URL+"/data", "Authorization", "User bob"); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob: %d", resp.StatusCode)
	}
}

// TestRoutesAndCosts: a route with a path parameter is one key; the checks
// of a route are decided together (an export costs 10 against the user and
// 1 against a global bucket, and a denied one charges neither); a request
// without the key's part gets a 401; a denial carries the cluster's headers
// and body, an admission its RateLimit headers; Charge counts more after
// the fact. Both ways of wrapping: the whole mux (Options.Mux) and each
// handler.
func TestRoutesAndCosts(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitLeader()
	guard := client.NewGuard(clientOf(c, 1), client.GuardOptions{})
	perUser := &client.Limit{Rate: 25, Period: time.Hour}
	global := &client.Limit{Rate: 1000, Period: time.Hour}
	routes := func(prefix string) middleware.Options {
		userCheck := func(cost int64) middleware.Check {
			return middleware.Check{Name: "user", Key: middleware.Join(middleware.Const(prefix+"user"), user), Limit: perUser, Cost: cost}
		}
		globalCheck := middleware.Check{Key: middleware.Const(prefix + "global"), Limit: global}
		return middleware.Options{Routes: map[string][]middleware.Check{
			"POST /export":    {userCheck(10), globalCheck},
			"GET /data":       {userCheck(1), globalCheck},
			"GET /users/{id}": {{Key: middleware.Join(middleware.Const(prefix+"route"), middleware.Route()), Limit: &client.Limit{Rate: 2, Period: time.Hour}}},
		}}
	}
	charged := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("rows") != "" {
			if _, err := middleware.Charge(r.Context(), "user", 5); err != nil {
				t.Errorf("Charge: %v", err)
			}
		}
		_, _ = io.WriteString(w, "served "+r.Pattern)
	}
	servers := map[string]*httptest.Server{}
	{ // the whole mux behind the limiter, which finds the patterns in it
		mux := http.NewServeMux()
		l, err := middleware.New(guard, routes("whole-"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"POST /export", "GET /data", "GET /users/{id}"} {
			mux.HandleFunc(p, charged)
		}
		servers["whole mux"] = httptest.NewServer(authenticate(l.Wrap(mux)))
	}
	{ // each handler behind the limiter
		mux := http.NewServeMux()
		l, err := middleware.New(guard, routes("each-"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"POST /export", "GET /data", "GET /users/{id}"} {
			mux.Handle(p, l.Wrap(http.HandlerFunc(charged)))
		}
		servers["each handler"] = httptest.NewServer(authenticate(mux))
	}
	for name, srv := range servers {
		t.Run(name, func(t *testing.T) {
			defer srv.Close()
			alice := []string{"Authorization", "User alice"}
			steps := []struct {
				method, path string
				header       []string
				want         int
			}{
				{"GET", "/users/1", nil, 200},
				{"GET", "/users/2", nil, 200},
				{"GET", "/users/3", nil, 429}, // one route, one key
				{"POST", "/export", alice, 200},
				{"POST", "/export", alice, 200},     // 20 of 25 spent
				{"POST", "/export", alice, 429},     // 30 > 25: neither bucket charged
				{"GET", "/data?rows=1", alice, 200}, // 21, then Charge: 26 > 25 refused, nothing spent
				{"GET", "/data", alice, 200},        // 22
				{"GET", "/data", alice, 200},        // 23
				{"GET", "/data", alice, 200},        // 24
				{"GET", "/data", alice, 200},        // 25
				{"GET", "/data", alice, 429},
				{"GET", "/data", nil, 401}, // no user: no key
			}
			for i, s := range steps {
				resp := get(t, s.method, srv.URL+s.path, s.header...)
				if resp.StatusCode != s.want {
					body, _ := io.ReadAll(resp.Body)
					t.Fatalf("step %d %s %s: %d %s, want %d", i, s.method, s.path, resp.StatusCode, body, s.want)
				}
				switch resp.StatusCode {
				case 200:
					if resp.Header.Get("RateLimit-Remaining") == "" || resp.Header.Get("RateLimit") == "" || resp.Header.Get("Retry-After") != "" {
						t.Fatalf("step %d: an admission's headers %v", i, resp.Header)
					}
				case 429:
					var body struct {
						Allowed      *bool `json:"allowed"`
						RetryAfterMS int64 `json:"retry_after_ms"`
					}
					raw, _ := io.ReadAll(resp.Body)
					if err := json.Unmarshal(raw, &body); err != nil || body.Allowed == nil || *body.Allowed || body.RetryAfterMS <= 0 {
						t.Fatalf("step %d: a denial's body %s, %v", i, raw, err)
					}
					if strings.Contains(string(raw), "alice") || strings.Contains(string(raw), `"key"`) {
						t.Fatalf("step %d: a denial shows the client its keys: %s", i, raw)
					}
					if resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit-Policy") == "" || resp.Header.Get("X-Limitnode-Degraded") != "" {
						t.Fatalf("step %d: a denial's headers %v", i, resp.Header)
					}
				case 401:
					var body struct{ Code string }
					if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Code != "unauthenticated" {
						t.Fatalf("step %d: %+v, %v", i, body, err)
					}
				}
			}
			// The global bucket was charged by the four admitted exports
			// and data calls only: 2 + 5 = 7.
			prefix := map[string]string{"whole mux": "whole-", "each handler": "each-"}[name]
			d, err := clientOf(c, 0).Allow(context.Background(), client.AllowRequest{Key: prefix + "global", Limit: global, Peek: true})
			if err != nil || d.Remaining != 1000-7 {
				t.Fatalf("global bucket: %+v, %v; want %d remaining", d, err, 1000-7)
			}
		})
	}
	if _, err := middleware.Charge(context.Background(), "user", 1); !errors.Is(err, middleware.ErrNotAdmitted) {
		t.Fatalf("Charge outside the middleware: %v", err)
	}
}

// TestClientIPIgnoresAForgedForwardedFor: keyed by client address, a
// client that sends X-Forwarded-For of its choosing keeps its own key; a
// trusted proxy's header is believed.
func TestClientIPIgnoresAForgedForwardedFor(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	c.WaitLeader()
	guard := client.NewGuard(clientOf(c, 0), client.GuardOptions{})
	loopback := netip.MustParsePrefix("127.0.0.0/8")
	tests := []struct {
		name     string
		key      middleware.KeyFunc
		wantLast int
	}{
		{"no trusted proxies", middleware.Join(middleware.Const("untrusted"), middleware.ClientIP()), 429},
		{"the peer is a trusted proxy", middleware.Join(middleware.Const("trusted"), middleware.ClientIP(loopback)), 200},
	}
	for _, tt := range tests {
		srv := replica(t, guard, middleware.Options{Default: []middleware.Check{{Key: tt.key, Limit: &client.Limit{Rate: 1, Period: time.Hour}}}}, "GET /")
		if resp := get(t, "GET", srv.URL+"/", "X-Forwarded-For", "198.51.100.1"); resp.StatusCode != 200 {
			t.Fatalf("%s: first request %d", tt.name, resp.StatusCode)
		}
		if resp := get(t, "GET", srv.URL+"/", "X-Forwarded-For", "198.51.100.2"); resp.StatusCode != tt.wantLast {
			t.Fatalf("%s: a request forwarded for another address: %d, want %d", tt.name, resp.StatusCode, tt.wantLast)
		}
	}
}

// TestClusterDown: with no node reachable each failure policy answers as
// documented, saying the answer is degraded.
func TestClusterDown(t *testing.T) {
	t.Parallel()
	down := client.New(nil, "127.0.0.1:1")
	limit := &client.Limit{Rate: 2, Period: time.Hour}
	tests := []struct {
		name   string
		policy client.FailurePolicy
		want   []int
	}{
		{"fail open", client.FailOpen, []int{200, 200, 200}},
		{"fail closed", client.FailClosed, []int{429, 429, 429}},
		{"a local limiter", client.FailLocal, []int{200, 200, 429}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := replica(t, client.NewGuard(down, client.GuardOptions{OnFailure: tt.policy}),
				middleware.Options{Default: []middleware.Check{{Key: middleware.Const("k"), Limit: limit}}}, "GET /")
			for i, want := range tt.want {
				resp := get(t, "GET", srv.URL+"/")
				if resp.StatusCode != want || resp.Header.Get("X-Limitnode-Degraded") != "true" {
					t.Fatalf("request %d: %d %v, want %d and degraded", i, resp.StatusCode, resp.Header, want)
				}
				if want == 429 && resp.Header.Get("Retry-After") == "" {
					t.Fatalf("request %d: a degraded denial without Retry-After", i)
				}
			}
		})
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	guard := client.NewGuard(client.New(nil, "127.0.0.1:1"), client.GuardOptions{})
	limit := &client.Limit{Rate: 1}
	tests := []struct {
		name string
		opts middleware.Options
	}{
		{"no key", middleware.Options{Default: []middleware.Check{{Limit: limit}}}},
		{"neither limit nor policy", middleware.Options{Default: []middleware.Check{{Key: middleware.Const("k")}}}},
		{"both limit and policy", middleware.Options{Default: []middleware.Check{{Key: middleware.Const("k"), Limit: limit, Policy: "p"}}}},
		{"a negative cost", middleware.Options{Routes: map[string][]middleware.Check{"/": {{Key: middleware.Const("k"), Limit: limit, Cost: -1}}}}},
		{"a name twice", middleware.Options{Default: []middleware.Check{{Name: "a", Key: middleware.Const("k"), Limit: limit}, {Name: "a", Key: middleware.Const("j"), Limit: limit}}}},
		{"settling checks of different costs", middleware.Options{SettleTTL: time.Minute, Routes: map[string][]middleware.Check{"/": {{Key: middleware.Const("k"), Limit: limit, Cost: 2}, {Key: middleware.Const("j"), Limit: limit}}}}},
	}
	for _, tt := range tests {
		if _, err := middleware.New(guard, tt.opts); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
	if _, err := middleware.New(nil, middleware.Options{}); err == nil {
		t.Error("no guard: accepted")
	}
}

// TestAHandlerSettlesWhatItUsed: with SettleTTL, a request reserves its
// route's cost (100 tokens of a user's 1,000) and the handler settles with
// what it used (7): the user has 993 left, on the cluster; settling again
// is refused and changes nothing; a handler that does not settle leaves
// the whole reservation charged; a context the middleware did not admit
// has nothing to settle.
func TestAHandlerSettlesWhatItUsed(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	guard := client.NewGuard(clientOf(c, 0), client.GuardOptions{})
	tokens := &client.Limit{Rate: 1000, Period: 24 * time.Hour}
	l, err := middleware.New(guard, middleware.Options{SettleTTL: time.Minute,
		Default: []middleware.Check{{Key: middleware.Join(middleware.Const("tokens"), user), Limit: tokens, Cost: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /generate", func(w http.ResponseWriter, r *http.Request) {
		s, err := middleware.Settle(r.Context(), 7)
		if err != nil || s.Refunded != 93 {
			t.Errorf("the settlement: %+v %v", s, err)
		}
		if _, err := middleware.Settle(r.Context(), 7); err == nil {
			t.Error("a second settlement of one request was accepted")
		}
		_, _ = io.WriteString(w, "seven tokens")
	})
	mux.HandleFunc("GET /forgetful", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "never settled") })
	srv := httptest.NewServer(authenticate(l.Wrap(mux)))
	t.Cleanup(srv.Close)
	left := func(who string) int64 {
		d, err := clientOf(c, 0).Allow(context.Background(), client.AllowRequest{Key: "tokens|" + who, Limit: tokens, Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}
	if resp := get(t, "GET", srv.URL+"/generate", "Authorization", "User alice"); resp.StatusCode != http.StatusOK {
		t.Fatalf("generate: %d", resp.StatusCode)
	}
	if got := left("alice"); got != 993 {
		t.Fatalf("alice has %d left, want 993: 100 reserved, 7 used", got)
	}
	if resp := get(t, "GET", srv.URL+"/forgetful", "Authorization", "User bob"); resp.StatusCode != http.StatusOK {
		t.Fatalf("forgetful: %d", resp.StatusCode)
	}
	if got := left("bob"); got != 900 {
		t.Fatalf("bob has %d left, want 900: the reservation unsettled, charged in full", got)
	}
	if _, err := middleware.Settle(context.Background(), 1); !errors.Is(err, middleware.ErrNotAdmitted) {
		t.Fatalf("settling outside the middleware: %v", err)
	}
}

// TestABlockedUsersDenialNamesNoKey: a user whose key an operator blocked
// is denied with the block's reason and how long it lasts, and the body
// holds neither the key (a user or tenant ID the end client should not
// see) nor any check.
func TestABlockedUsersDenialNamesNoKey(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitLeader()
	ops := clientOf(c, 0)
	if _, err := ops.PutBlock(context.Background(), "per-user|secret-user-key", time.Hour, "abuse"); err != nil {
		t.Fatal(err)
	}
	opts := middleware.Options{Default: []middleware.Check{{Key: middleware.Join(middleware.Const("per-user"), user), Limit: &client.Limit{Rate: 100, Period: time.Hour}}}}
	srv := replica(t, client.NewGuard(clientOf(c, 1), client.GuardOptions{}), opts, "GET /data")
	resp := get(t, "GET", srv.URL+"/data", "Authorization", "User secret-user-key")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"abuse"`) || strings.Contains(string(body), "secret-user-key") {
		t.Fatalf("%d %s: want a 429 with the block's reason and without the key", resp.StatusCode, body)
	}
}
