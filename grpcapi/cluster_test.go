package grpcapi_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/rls"
	"github.com/limitnode/limitnode/testcluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// putDomain stores a configuration through the cluster.
func putDomain(t *testing.T, c *testcluster.Cluster, yaml string) {
	t.Helper()
	conf, err := rls.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
	defer cancel()
	if err := c.WaitLeader().Node().PutRLSConfig(ctx, conf); err != nil {
		t.Fatalf("put %s: %v", conf.Domain, err)
	}
}

// desc is a request descriptor of key, value pairs; hits < 0 leaves its
// hits_addend unset.
func desc(hits int64, kv ...string) *ratelimitcommon.RateLimitDescriptor {
	d := &ratelimitcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	if hits >= 0 {
		d.HitsAddend = wrapperspb.UInt64(uint64(hits))
	}
	return d
}

func TestShouldRateLimitThroughAFollower(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	putDomain(t, c, `
domain: edge
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 2, name: per-client, algorithm: token_bucket}
  - key: route
    value: /export
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: sliding_window_counter}
`)
	follower := c.Followers()[0]
	client := ratelimitv3.NewRateLimitServiceClient(follower.DialGRPC())
	ctx := context.Background()
	call := func(ds ...*ratelimitcommon.RateLimitDescriptor) *ratelimitv3.RateLimitResponse {
		t.Helper()
		resp, err := client.ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: "edge", Descriptors: ds})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp
	}

	for i := range 2 {
		if resp := call(desc(-1, "client", "c1")); resp.OverallCode != ratelimitv3.RateLimitResponse_OK {
			t.Fatalf("hit %d of 2: %v", i+1, resp.OverallCode)
		}
	}
	over := call(desc(-1, "client", "c1"), desc(-1, "route", "/export"))
	if over.OverallCode != ratelimitv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("the third hit of 2 an hour: %v", over.OverallCode)
	}
	st := over.Statuses[0]
	if st.Code != ratelimitv3.RateLimitResponse_OVER_LIMIT || st.LimitRemaining != 0 ||
		st.CurrentLimit.GetName() != "per-client" || st.CurrentLimit.GetRequestsPerUnit() != 2 ||
		st.CurrentLimit.GetUnit() != ratelimitv3.RateLimitResponse_RateLimit_HOUR {
		t.Fatalf("the denying status: %v", st)
	}
	if d := st.DurationUntilReset.AsDuration(); d <= 0 || d > time.Hour {
		t.Fatalf("duration_until_reset %v, want the rest of the hour's window", d)
	}
	if st := over.Statuses[1]; st.Code != ratelimitv3.RateLimitResponse_OK || st.LimitRemaining != 5 {
		t.Fatalf("the other descriptor of a denied request: %v, want OK with all 5 left (nothing consumed)", st)
	}
	headers := map[string]string{}
	for _, h := range over.ResponseHeadersToAdd {
		headers[h.Key] = h.Value
	}
	if headers["RateLimit-Limit"] != "2" || headers["RateLimit-Remaining"] != "0" || headers["Retry-After"] == "" {
		t.Fatalf("response_headers_to_add %v, want the denying limit's with Retry-After", headers)
	}
	// A check without consuming: hits_addend 0 on the descriptor.
	if resp := call(desc(0, "route", "/export")); resp.Statuses[0].LimitRemaining != 5 {
		t.Fatalf("a check consumed: %v", resp.Statuses[0])
	}

	// Health and reflection answer, so Envoy's health checks and grpcurl work.
	conn := follower.DialGRPC()
	// The health service follows the node's readiness within a second.
	testenv.WaitFor(t, "the rate limit service's health to say SERVING", func() bool {
		health, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
		return err == nil && health.Status == healthpb.HealthCheckResponse_SERVING
	})
	if services := listServices(t, conn); !strings.Contains(services, "envoy.service.ratelimit.v3.RateLimitService") || !strings.Contains(services, "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %s", services)
	}

	// The follower's /metrics counts the metered descriptors by name or
	// configuration path, never by a request's value.
	resp, err := testcluster.HTTPClient().Get(follower.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`limitnode_rls_over_limit_total{descriptor="per-client",domain="edge"} 1`,
		`limitnode_rls_within_limit_total{descriptor="per-client",domain="edge"} 2`,
		`limitnode_rls_hits_total{descriptor="route_/export",domain="edge"} 1`,
		`limitnode_rls_requests_total{code="OVER_LIMIT"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(body), "c1") {
		t.Error("/metrics names a request's value")
	}
}

// listServices asks the reflection service which services the server has.
func listServices(t *testing.T, conn *grpc.ClientConn) string {
	t.Helper()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	return fmt.Sprint(resp.GetListServicesResponse().GetService())
}

// The examples of envoyproxy/ratelimit's README (rls/testdata/examples),
// each stored in the cluster and asked through a follower over gRPC.
func TestReferenceExamplesOverGRPC(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	client := ratelimitv3.NewRateLimitServiceClient(c.Followers()[0].DialGRPC())
	type step struct {
		descriptors []*ratelimitcommon.RateLimitDescriptor
		want        string // overall, then each descriptor: ok, over, unlimited or - (no limit)
	}
	tests := []struct {
		example string
		steps   func(v string) []step // v makes the values of a retry fresh
	}{
		{"example1", func(string) []step {
			return []step{
				{[]*ratelimitcommon.RateLimitDescriptor{desc(500, "database", "users")}, "OK ok"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(1, "database", "users"), desc(1, "database", "other")}, "OVER_LIMIT over -"},
			}
		}},
		{"example2", func(v string) []step {
			return []step{
				{[]*ratelimitcommon.RateLimitDescriptor{desc(5, "message_type", "marketing", "to_number", v), desc(5, "to_number", v)}, "OK ok ok"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(1, "message_type", "marketing", "to_number", v), desc(1, "to_number", v)}, "OVER_LIMIT over ok"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(95, "to_number", v)}, "OK ok"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(1, "to_number", v)}, "OVER_LIMIT over"},
			}
		}},
		{"example3", func(v string) []step {
			return []step{
				{[]*ratelimitcommon.RateLimitDescriptor{desc(1, "remote_address", "50.0.0.5")}, "OVER_LIMIT over"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(10, "remote_address", v)}, "OK ok"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(1, "remote_address", v)}, "OVER_LIMIT over"},
			}
		}},
		{"example4", func(v string) []step {
			return []step{
				{[]*ratelimitcommon.RateLimitDescriptor{desc(300, "key", "value", "subkey", v), desc(1000, "key", "value"), desc(1000, "key", "value", "subkey", v, "extra", "x")}, "OK ok - -"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(1, "key", "value", "subkey", v)}, "OVER_LIMIT over"},
			}
		}},
		{"example5", func(v string) []step {
			return []step{
				{[]*ratelimitcommon.RateLimitDescriptor{desc(1_000_000, "ldap", v), desc(100, "azure", v)}, "OK unlimited ok"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(1, "azure", v)}, "OVER_LIMIT over"},
			}
		}},
		{"example6", func(v string) []step {
			return []step{
				{[]*ratelimitcommon.RateLimitDescriptor{desc(11, "service", v, "user", "user-a")}, "OK ok"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(21, "service", v, "user", "user-b")}, "OVER_LIMIT over"},
			}
		}},
		{"example7", func(string) []step {
			return []step{
				{[]*ratelimitcommon.RateLimitDescriptor{desc(6, "key_1", "value_1", "user", "bkthomps"), desc(6, "key_2", "value_2", "user", "bkthomps")}, "OK - ok"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(6, "key_1", "value_1", "user", "bkthomps")}, "OVER_LIMIT over"},
			}
		}},
		{"example8", func(v string) []step {
			return []step{
				{[]*ratelimitcommon.RateLimitDescriptor{desc(20, "key1", "value1"), desc(10, "key1", v)}, "OK ok ok"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(1, "key1", v)}, "OVER_LIMIT over"},
			}
		}},
		{"example9", func(v string) []step {
			return []step{
				{[]*ratelimitcommon.RateLimitDescriptor{desc(20, "key1", "value"+v), desc(20, "path", "/api/"+v+"/action"), desc(20, "route", "/api/"+v+"/resource/r/action"), desc(20, "path", "/api/"+v+"/other")}, "OK ok ok ok -"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(1, "path", "/api/"+v+"/action")}, "OVER_LIMIT over"},
			}
		}},
		{"example10", func(v string) []step {
			return []step{
				{[]*ratelimitcommon.RateLimitDescriptor{desc(60, "route", "r", "http_method", "GET", "subject_id", v), desc(100, "user", v, "action", "readAll", "resource", "r")}, "OK ok ok"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(1, "user", v, "action", "readAll", "resource", "r")}, "OVER_LIMIT over"},
				// Without share_threshold, each value the wildcard matches counts apart.
				{[]*ratelimitcommon.RateLimitDescriptor{desc(100, "user", v, "action", "readOne", "resource", "r")}, "OK ok"},
			}
		}},
		{"example11", func(v string) []step {
			return []step{
				{[]*ratelimitcommon.RateLimitDescriptor{desc(6, "files", "files/a"+v), desc(6, "files_no_share", "files_no_share/a"+v)}, "OK ok ok"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(5, "files", "files/b"+v)}, "OVER_LIMIT over"},
				{[]*ratelimitcommon.RateLimitDescriptor{desc(5, "files_no_share", "files_no_share/b"+v)}, "OK ok"},
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.example, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "rls", "testdata", "examples", tt.example+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			putDomain(t, c, string(data))
			conf, _ := rls.Parse(data)
			// Steps that straddle two windows see a fresh counter midway:
			// then wait for a window none of them touched and run them
			// again, with fresh values where the configuration allows.
			for attempt := 0; ; attempt++ {
				start := time.Now()
				window := windowOf(t, client, conf.Domain, tt.steps(fmt.Sprintf("v%d", attempt))[0].descriptors)
				failed := ""
				for i, st := range tt.steps(fmt.Sprintf("v%d", attempt)) {
					resp, err := client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: conf.Domain, Descriptors: st.descriptors})
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if got := outcome(resp); got != st.want {
						failed = fmt.Sprintf("step %d: got %q, want %q", i, got, st.want)
						break
					}
				}
				switch {
				case failed == "":
					return
				case time.Since(start) < window.reset || attempt == 3 || window.period > time.Minute:
					t.Fatal(failed)
				}
				for time.Since(start) < window.reset+window.period {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
}

// window is the shortest window a request's limits count in: the time
// until it resets and its length.
type window struct{ reset, period time.Duration }

// windowOf asks, without consuming, which windows a request's limits are in.
func windowOf(t *testing.T, client ratelimitv3.RateLimitServiceClient, domain string, ds []*ratelimitcommon.RateLimitDescriptor) window {
	t.Helper()
	var checks []*ratelimitcommon.RateLimitDescriptor
	for _, d := range ds {
		checks = append(checks, &ratelimitcommon.RateLimitDescriptor{Entries: d.Entries, HitsAddend: wrapperspb.UInt64(0)})
	}
	resp, err := client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: checks})
	if err != nil {
		t.Fatal(err)
	}
	w := window{reset: time.Duration(math.MaxInt64), period: time.Second}
	for _, s := range resp.Statuses {
		if s.CurrentLimit == nil {
			continue
		}
		if r := s.DurationUntilReset.AsDuration(); r < w.reset {
			w.reset = r
			w.period, _ = rls.UnitPeriod(s.CurrentLimit.Unit.String())
		}
	}
	return w
}

// outcome spells a response as the steps above want it.
func outcome(resp *ratelimitv3.RateLimitResponse) string {
	parts := []string{resp.OverallCode.String()}
	for _, s := range resp.Statuses {
		switch {
		case s.LimitRemaining == math.MaxUint32 && s.CurrentLimit == nil:
			parts = append(parts, "unlimited")
		case s.CurrentLimit == nil:
			parts = append(parts, "-")
		case s.Code == ratelimitv3.RateLimitResponse_OVER_LIMIT:
			parts = append(parts, "over")
		default:
			parts = append(parts, "ok")
		}
	}
	return strings.Join(parts, " ")
}

// TestLeaderKillOverAdmitsNothing drives ShouldRateLimit through both
// followers while the leader is killed: the admitted hits never exceed the
// limit, and what the cluster counted lies between what it acknowledged
// and that plus the calls whose outcome was unknown.
func TestLeaderKillOverAdmitsNothing(t *testing.T) {
	t.Parallel()
	const limit = 60
	c := testcluster.Start(t, 3)
	putDomain(t, c, fmt.Sprintf("domain: jobs\ndescriptors:\n  - key: job\n    rate_limit: {unit: day, requests_per_unit: %d, algorithm: token_bucket}\n", limit))
	leader := c.WaitLeader()
	var clients []ratelimitv3.RateLimitServiceClient
	for _, f := range c.Followers() {
		clients = append(clients, ratelimitv3.NewRateLimitServiceClient(f.DialGRPC()))
	}
	req := &ratelimitv3.RateLimitRequest{Domain: "jobs", Descriptors: []*ratelimitcommon.RateLimitDescriptor{desc(-1, "job", "export")}}
	var admitted, unknown, denied atomic.Int64
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for caller := range 16 {
		wg.Go(func() {
			client := clients[caller%len(clients)]
			for denied.Load() < 50 {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				resp, err := client.ShouldRateLimit(ctx, req)
				cancel()
				switch {
				case err != nil:
					unknown.Add(1)
					if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
						t.Errorf("error %v, want UNAVAILABLE or DEADLINE_EXCEEDED", err)
						return
					}
					time.Sleep(20 * time.Millisecond) // back off while a leader is elected
				case resp.OverallCode == ratelimitv3.RateLimitResponse_OK:
					if admitted.Add(1) == limit/3 {
						once.Do(func() { leader.Kill(); close(killed) })
					}
				default:
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatal("the leader was never killed")
	}
	if a := admitted.Load(); a > limit {
		t.Fatalf("%d hits admitted under a limit of %d", a, limit)
	}
	check, err := clients[0].ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: "jobs",
		Descriptors: []*ratelimitcommon.RateLimitDescriptor{desc(0, "job", "export")}})
	if err != nil {
		t.Fatal(err)
	}
	counted := int64(limit) - int64(check.Statuses[0].LimitRemaining)
	if a, u := admitted.Load(), unknown.Load(); counted < a || counted > a+u {
		t.Fatalf("the cluster counted %d hits; acknowledged %d, unknown %d", counted, a, u)
	}
	t.Logf("%d admitted, %d denied, %d unknown across the leader's death", admitted.Load(), denied.Load(), unknown.Load())
}
