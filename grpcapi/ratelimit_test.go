package grpcapi

import (
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/rls"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// fakeLimiter answers every query with decision and err, and remembers the
// query.
type fakeLimiter struct {
	mu       sync.Mutex
	decision rls.Decision
	err      error
	last     rls.Query
	notReady string
}

func (f *fakeLimiter) ShouldRateLimit(_ context.Context, q rls.Query) (rls.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = q
	return f.decision, f.err
}

func (f *fakeLimiter) Ready() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notReady
}

// serve starts the server on 127.0.0.1 and returns a client connection.
func serve(t *testing.T, l Limiter, opts Options) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(l, opts)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func entries(kv ...string) []*ratelimitcommon.RateLimitDescriptor_Entry {
	var out []*ratelimitcommon.RateLimitDescriptor_Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &ratelimitcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestRequestsBecomeQueries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		req   *ratelimitv3.RateLimitRequest
		want  []rls.QueryDescriptor // nil: refused
		field string
	}{
		{"hits_addend unset means 1", &ratelimitv3.RateLimitRequest{Domain: "d",
			Descriptors: []*ratelimitcommon.RateLimitDescriptor{{Entries: entries("k", "v")}}},
			[]rls.QueryDescriptor{{Entries: []rls.Entry{{Key: "k", Value: "v"}}, Hits: 1}}, ""},
		{"the request's hits_addend applies to every descriptor", &ratelimitv3.RateLimitRequest{Domain: "d", HitsAddend: 7,
			Descriptors: []*ratelimitcommon.RateLimitDescriptor{{Entries: entries("a", "1")}, {Entries: entries("b", "2")}}},
			[]rls.QueryDescriptor{{Entries: []rls.Entry{{Key: "a", Value: "1"}}, Hits: 7}, {Entries: []rls.Entry{{Key: "b", Value: "2"}}, Hits: 7}}, ""},
		{"a descriptor's own hits_addend wins, 0 included", &ratelimitv3.RateLimitRequest{Domain: "d", HitsAddend: 7,
			Descriptors: []*ratelimitcommon.RateLimitDescriptor{{Entries: entries("a", "1"), HitsAddend: wrapperspb.UInt64(0)}}},
			[]rls.QueryDescriptor{{Entries: []rls.Entry{{Key: "a", Value: "1"}}, Hits: 0}}, ""},
		{"an override", &ratelimitv3.RateLimitRequest{Domain: "d",
			Descriptors: []*ratelimitcommon.RateLimitDescriptor{{Entries: entries("a", "1"),
				Limit: &ratelimitcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9, Unit: typev3.RateLimitUnit_MINUTE}}}},
			[]rls.QueryDescriptor{{Entries: []rls.Entry{{Key: "a", Value: "1"}}, Hits: 1, Override: &rls.Override{RequestsPerUnit: 9, Unit: "MINUTE"}}}, ""},
		{"no domain", &ratelimitv3.RateLimitRequest{Descriptors: []*ratelimitcommon.RateLimitDescriptor{{Entries: entries("a", "1")}}}, nil, "domain"},
		{"no descriptors", &ratelimitv3.RateLimitRequest{Domain: "d"}, nil, "descriptors"},
		{"a descriptor without entries", &ratelimitv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitcommon.RateLimitDescriptor{{}}}, nil, "descriptors[0].entries"},
		{"negative hits", &ratelimitv3.RateLimitRequest{Domain: "d",
			Descriptors: []*ratelimitcommon.RateLimitDescriptor{{Entries: entries("a", "1"), IsNegativeHits: true}}}, nil, "descriptors[0].is_negative_hits"},
		{"hits over the bound", &ratelimitv3.RateLimitRequest{Domain: "d",
			Descriptors: []*ratelimitcommon.RateLimitDescriptor{{Entries: entries("a", "1"), HitsAddend: wrapperspb.UInt64(math.MaxUint64)}}}, nil, "descriptors[0].hits_addend"},
		{"an override without a unit", &ratelimitv3.RateLimitRequest{Domain: "d",
			Descriptors: []*ratelimitcommon.RateLimitDescriptor{{Entries: entries("a", "1"),
				Limit: &ratelimitcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9}}}}, nil, "descriptors[0].limit.unit"},
		{"an override with a unit multiplier", &ratelimitv3.RateLimitRequest{Domain: "d",
			Descriptors: []*ratelimitcommon.RateLimitDescriptor{{Entries: entries("a", "1"),
				Limit: &ratelimitcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9, Unit: typev3.RateLimitUnit_SECOND, UnitMultiplier: wrapperspb.UInt32(5)}}}}, nil, "descriptors[0].limit.unit_multiplier"},
		{"too many descriptors", &ratelimitv3.RateLimitRequest{Domain: "d",
			Descriptors: make([]*ratelimitcommon.RateLimitDescriptor, rls.MaxQueryDescriptors+1)}, nil, "descriptors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := queryOf(tt.req)
			if tt.want == nil {
				var cerr *contract.Error
				if !errors.As(err, &cerr) || cerr.Field != tt.field {
					t.Fatalf("error %v, want one naming %q", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(q.Descriptors) != len(tt.want) {
				t.Fatalf("%d descriptors, want %d", len(q.Descriptors), len(tt.want))
			}
			for i, d := range q.Descriptors {
				w := tt.want[i]
				if d.Hits != w.Hits || len(d.Entries) != len(w.Entries) || d.Entries[0] != w.Entries[0] ||
					(d.Override == nil) != (w.Override == nil) || (d.Override != nil && *d.Override != *w.Override) {
					t.Fatalf("descriptor %d: %+v, want %+v", i, d, w)
				}
			}
		})
	}
}

func TestResponsesCarryStatusesAndHeaders(t *testing.T) {
	t.Parallel()
	perMinute := func(allowed bool, remaining int64) rls.DescriptorDecision {
		d := rls.DescriptorDecision{
			Status:   rls.Status{Limited: true, Name: "per-client", RequestsPerUnit: 2, Unit: "MINUTE", Algorithm: algorithms.FixedWindow},
			Decision: algorithms.Decision{Allowed: allowed, Limit: 2, Remaining: remaining, ResetAfter: 20 * time.Second},
			Period:   time.Minute,
		}
		if !allowed {
			d.Decision.RetryAfter = 20 * time.Second
		}
		return d
	}
	at := int64(1_800_000_040_000_000_000) // 40 s into a minute
	tests := []struct {
		name        string
		decision    rls.Decision
		overall     ratelimitv3.RateLimitResponse_Code
		codes       []ratelimitv3.RateLimitResponse_Code
		remaining   []uint32
		headers     map[string]string
		noHeaderFor bool
	}{
		{"allowed", rls.Decision{Allowed: true, AtNanos: at, Descriptors: []rls.DescriptorDecision{perMinute(true, 1)}},
			ratelimitv3.RateLimitResponse_OK, []ratelimitv3.RateLimitResponse_Code{ratelimitv3.RateLimitResponse_OK}, []uint32{1},
			map[string]string{"RateLimit-Limit": "2", "RateLimit-Remaining": "1", "RateLimit-Reset": "20"}, false},
		{"over the limit", rls.Decision{AtNanos: at, Descriptors: []rls.DescriptorDecision{{}, perMinute(false, 0)}},
			ratelimitv3.RateLimitResponse_OVER_LIMIT, []ratelimitv3.RateLimitResponse_Code{ratelimitv3.RateLimitResponse_OK, ratelimitv3.RateLimitResponse_OVER_LIMIT}, []uint32{0, 0},
			map[string]string{"RateLimit-Limit": "2", "RateLimit-Remaining": "0", "Retry-After": "20"}, false},
		{"unlimited", rls.Decision{Allowed: true, AtNanos: at, Descriptors: []rls.DescriptorDecision{{Status: rls.Status{Unlimited: true}}}},
			ratelimitv3.RateLimitResponse_OK, []ratelimitv3.RateLimitResponse_Code{ratelimitv3.RateLimitResponse_OK}, []uint32{math.MaxUint32}, nil, true},
		{"a shadow denial reads OK", rls.Decision{Allowed: true, AtNanos: at, Descriptors: []rls.DescriptorDecision{func() rls.DescriptorDecision {
			d := perMinute(false, 0)
			d.Shadow = true
			return d
		}()}}, ratelimitv3.RateLimitResponse_OK, []ratelimitv3.RateLimitResponse_Code{ratelimitv3.RateLimitResponse_OK}, []uint32{0}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := responseOf(tt.decision, func(int64) int64 { return 0 })
			if resp.OverallCode != tt.overall {
				t.Fatalf("overall %v, want %v", resp.OverallCode, tt.overall)
			}
			for i, st := range resp.Statuses {
				if st.Code != tt.codes[i] || st.LimitRemaining != tt.remaining[i] {
					t.Fatalf("status %d: %v, remaining %d; want %v, %d", i, st.Code, st.LimitRemaining, tt.codes[i], tt.remaining[i])
				}
				if d := tt.decision.Descriptors[i]; d.Limited {
					if st.CurrentLimit.GetName() != "per-client" || st.CurrentLimit.GetUnit() != ratelimitv3.RateLimitResponse_RateLimit_MINUTE {
						t.Fatalf("status %d: limit %v", i, st.CurrentLimit)
					}
					if got := st.DurationUntilReset.AsDuration(); got != 20*time.Second {
						t.Fatalf("status %d: resets in %v, want the 20 s left of the window", i, got)
					}
				}
			}
			got := map[string]string{}
			for _, h := range resp.ResponseHeadersToAdd {
				got[h.Key] = h.Value
			}
			if tt.noHeaderFor && len(got) > 0 {
				t.Fatalf("headers %v, want none", got)
			}
			for k, v := range tt.headers {
				if got[k] != v {
					t.Fatalf("header %s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

func TestErrorsMapToGRPCCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want codes.Code
	}{
		{contract.ErrNoLeader, codes.Unavailable},
		{contract.ErrOutcomeUnknown, codes.Unavailable},
		{contract.ErrShutdown, codes.Unavailable},
		{contract.Invalid("descriptors[0].entries", "too long"), codes.InvalidArgument},
		{contract.Exhausted("full"), codes.ResourceExhausted},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{errors.New("a bug"), codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			t.Parallel()
			conn := serve(t, &fakeLimiter{err: tt.err}, Options{})
			_, err := ratelimitv3.NewRateLimitServiceClient(conn).ShouldRateLimit(context.Background(),
				&ratelimitv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitcommon.RateLimitDescriptor{{Entries: entries("a", "1")}}})
			if status.Code(err) != tt.want {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tt.want)
			}
		})
	}
}

// tokens is an Authorizer with one token per role.
type tokens map[string]auth.Role

func (tk tokens) Authorize(token string, role auth.Role) (string, error) {
	has, ok := tk[token]
	switch {
	case !ok:
		return "", auth.ErrUnauthenticated
	case has == role || has == auth.RoleAdmin:
		return string(has), nil
	default:
		return "", auth.ErrPermissionDenied
	}
}

func TestCallsNeedTheirRole(t *testing.T) {
	t.Parallel()
	fake := &fakeLimiter{decision: rls.Decision{Allowed: true, Descriptors: []rls.DescriptorDecision{{}}}}
	conn := serve(t, fake, Options{Authorizer: tokens{"d-token": auth.RoleDecide, "r-token": auth.RoleRead}})
	req := &ratelimitv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitcommon.RateLimitDescriptor{{Entries: entries("a", "1")}}}
	tests := []struct {
		name, authorization string
		want                codes.Code
	}{
		{"no token", "", codes.Unauthenticated},
		{"an unknown token", "Bearer nope", codes.Unauthenticated},
		{"a token without the role", "Bearer r-token", codes.PermissionDenied},
		{"the decide role", "Bearer d-token", codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.authorization != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tt.authorization)
			}
			_, err := ratelimitv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req)
			if status.Code(err) != tt.want {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "token") && strings.Contains(err.Error(), "nope") {
				t.Fatal("the answer repeats the token")
			}
		})
	}
	// Health is open, as /healthz is, and follows readiness.
	health := healthpb.NewHealthClient(conn)
	resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: ratelimitv3.RateLimitService_ServiceDesc.ServiceName})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v, want SERVING", resp, err)
	}
	fake.mu.Lock()
	fake.notReady = "no leader"
	fake.mu.Unlock()
	testenv.WaitFor(t, "health to say NOT_SERVING once the node stopped being ready", func() bool {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err == nil && resp.Status == healthpb.HealthCheckResponse_NOT_SERVING
	})
}

// TestDurationUntilResetIsTheWindowsEnd: for the window algorithms, Envoy
// is told when the current window ends (never more than its unit: a
// sliding counter of a minute once said 71 s); for a bucket, when it is
// full again.
func TestDurationUntilResetIsTheWindowsEnd(t *testing.T) {
	t.Parallel()
	minute := int64(time.Minute)
	at := 10*minute + 45*int64(time.Second) // 45 s into a minute's window
	tests := []struct {
		name      string
		algorithm algorithms.Algorithm
		resetAt   int64 // the decision's time until fully available
		want      int64
	}{
		{"a fixed window", algorithms.FixedWindow, 0, 15 * int64(time.Second)},
		{"a sliding window counter", algorithms.SlidingWindowCounter, 71 * int64(time.Second), 15 * int64(time.Second)},
		{"a token bucket", algorithms.TokenBucket, 71 * int64(time.Second), 71 * int64(time.Second)},
	}
	for _, tt := range tests {
		dd := &rls.DescriptorDecision{Period: time.Duration(minute), Decision: algorithms.Decision{ResetAfter: time.Duration(tt.resetAt)}}
		dd.Algorithm = tt.algorithm
		if got := untilReset(dd, at); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, time.Duration(got), time.Duration(tt.want))
		}
	}
}
