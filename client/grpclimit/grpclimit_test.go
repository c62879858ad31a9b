package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/client/grpclimit"
	"github.com/limitnode/limitnode/testcluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
)

// serve runs gRPC's health service behind the limiter's interceptors on a
// port the OS picks and returns a client of it.
func serve(t *testing.T, guard *client.Guard, opts grpclimit.Options) healthpb.HealthClient {
	t.Helper()
	l, err := grpclimit.New(guard, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(l.Unary()), grpc.StreamInterceptor(l.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func clientOf(c *testcluster.Cluster, i int) *client.Client {
	return client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, c.Nodes[i].URL())
}

// answered is the metadata a call was answered with.
type answered struct{ header, trailer metadata.MD }

// check makes a unary call with the metadata pairs md and returns its
// status code and the metadata it was answered with.
func check(t *testing.T, hc healthpb.HealthClient, md ...string) (codes.Code, answered) {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), md...)
	var a answered
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&a.header), grpc.Trailer(&a.trailer))
	return status.Code(err), a
}

// TestReplicasShareOneLimit: three gRPC servers, each with its own
// interceptor and client talking to another node, hold a per-user limit of
// 10 together; a call without the user's metadata is Unauthenticated.
func TestReplicasShareOneLimit(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitLeader()
	opts := grpclimit.Options{Default: []grpclimit.Check{{Key: grpclimit.Join(grpclimit.Const("user"), grpclimit.Metadata("x-user")), Limit: &client.Limit{Rate: 10, Period: time.Hour}}}}
	var replicas []healthpb.HealthClient
	for i := range 3 {
		replicas = append(replicas, serve(t, client.NewGuard(clientOf(c, i), client.GuardOptions{}), opts))
	}
	counts := map[codes.Code]int{}
	for i := range 30 {
		code, md := check(t, replicas[i%3], "x-user", "alice")
		counts[code]++
		if code == codes.ResourceExhausted && (len(md.trailer.Get("retry-after")) == 0 || len(md.trailer.Get("ratelimit-policy")) == 0 || len(md.trailer.Get("grpc-retry-pushback-ms")) == 0) {
			t.Fatalf("a denial's metadata: %v", md)
		}
		if code == codes.OK && len(md.header.Get("ratelimit-remaining")) == 0 {
			t.Fatalf("an admission's metadata: %v", md)
		}
	}
	if counts[codes.OK] != 10 || counts[codes.ResourceExhausted] != 20 {
		t.Fatalf("alice over three replicas: %v, want 10 OK and 20 ResourceExhausted", counts)
	}
	if code, _ := check(t, replicas[0]); code != codes.Unauthenticated {
		t.Fatalf("a call without x-user: %v", code)
	}
}

// TestMethodsPeersAndStreams: each method has its own checks (Check keyed
// by method, Watch's stream by peer); a forged x-forwarded-for from an
// untrusted peer does not change the key; a stream is decided when it
// opens; Charge works inside a handler's context only.
func TestMethodsPeersAndStreams(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	c.WaitLeader()
	guard := client.NewGuard(clientOf(c, 0), client.GuardOptions{})
	hc := serve(t, guard, grpclimit.Options{Methods: map[string][]grpclimit.Check{
		checkMethod: {{Key: grpclimit.Join(grpclimit.Const("m"), grpclimit.Method()), Limit: &client.Limit{Rate: 2, Period: time.Hour}}},
		watchMethod: {{Key: grpclimit.Join(grpclimit.Const("peer"), grpclimit.PeerIP()), Limit: &client.Limit{Rate: 1, Period: time.Hour}}},
	}})
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		if code, _ := check(t, hc, "x-forwarded-for", "198.51.100.1"); code != want {
			t.Fatalf("Check %d: %v, want %v", i, code, want)
		}
	}
	watch := func(forwardedFor string) codes.Code {
		ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", forwardedFor))
		defer cancel()
		stream, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return status.Code(err)
		}
		_, err = stream.Recv()
		return status.Code(err)
	}
	if code := watch("198.51.100.1"); code != codes.OK {
		t.Fatalf("first Watch: %v", code)
	}
	if code := watch("198.51.100.2"); code != codes.ResourceExhausted {
		t.Fatalf("a Watch forwarded for another address from an untrusted peer: %v, want ResourceExhausted", code)
	}
	if _, err := grpclimit.Charge(context.Background(), "x", 1); !errors.Is(err, grpclimit.ErrNotAdmitted) {
		t.Fatalf("Charge outside the interceptor: %v", err)
	}
}

// TestTrustedProxy: behind a trusted proxy, x-forwarded-for names the
// client, so two clients are two keys.
func TestTrustedProxy(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	c.WaitLeader()
	hc := serve(t, client.NewGuard(clientOf(c, 0), client.GuardOptions{}), grpclimit.Options{Default: []grpclimit.Check{
		{Key: grpclimit.Join(grpclimit.Const("trusted"), grpclimit.PeerIP(netip.MustParsePrefix("127.0.0.0/8"))), Limit: &client.Limit{Rate: 1, Period: time.Hour}},
	}})
	for _, client := range []string{"198.51.100.1", "198.51.100.2"} {
		if code, _ := check(t, hc, "x-forwarded-for", client); code != codes.OK {
			t.Fatalf("first call of %s: %v", client, code)
		}
	}
	if code, _ := check(t, hc, "x-forwarded-for", "198.51.100.1"); code != codes.ResourceExhausted {
		t.Fatalf("second call of 198.51.100.1: %v", code)
	}
}

// TestClusterDown: with no node reachable each failure policy answers as
// documented, saying the answer is degraded.
func TestClusterDown(t *testing.T) {
	t.Parallel()
	down := client.New(nil, "127.0.0.1:1")
	tests := []struct {
		policy client.FailurePolicy
		want   []codes.Code
	}{
		{client.FailOpen, []codes.Code{codes.OK, codes.OK, codes.OK}},
		{client.FailClosed, []codes.Code{codes.ResourceExhausted, codes.ResourceExhausted}},
		{client.FailLocal, []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}},
	}
	for _, tt := range tests {
		hc := serve(t, client.NewGuard(down, client.GuardOptions{OnFailure: tt.policy}),
			grpclimit.Options{Default: []grpclimit.Check{{Key: grpclimit.Const("k"), Limit: &client.Limit{Rate: 2, Period: time.Hour}}}})
		for i, want := range tt.want {
			code, md := check(t, hc)
			if got := metadata.Join(md.header, md.trailer); code != want || len(got.Get("x-limitnode-degraded")) == 0 {
				t.Fatalf("policy %d, call %d: %v %v, want %v and degraded", tt.policy, i, code, md, want)
			}
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	guard := client.NewGuard(client.New(nil, "127.0.0.1:1"), client.GuardOptions{})
	bad := []grpclimit.Options{
		{Default: []grpclimit.Check{{Limit: &client.Limit{Rate: 1}}}},
		{Methods: map[string][]grpclimit.Check{checkMethod: {{Key: grpclimit.Method()}}}},
		{SettleTTL: time.Minute, Default: []grpclimit.Check{{Key: grpclimit.Method(), Limit: &client.Limit{Rate: 9}, Cost: 3}, {Key: grpclimit.Const("g"), Limit: &client.Limit{Rate: 9}}}},
	}
	for i, opts := range bad {
		if _, err := grpclimit.New(guard, opts); err == nil {
			t.Errorf("options %d accepted", i)
		}
	}
}

// settlingHealth answers Check after settling the call's reservation with
// what it "used", 3.
type settlingHealth struct {
	healthpb.UnimplementedHealthServer
	t *testing.T
}

func (h settlingHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if s, err := grpclimit.Settle(ctx, 3); err != nil || s.Refunded != 7 {
		h.t.Errorf("the settlement: %+v %v", s, err)
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestACallSettlesWhatItUsed: with SettleTTL, a call reserves its method's
// cost (10) and the handler settles with what it used (3): the key has 3
// spent on the cluster, not 10.
func TestACallSettlesWhatItUsed(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	limit := &client.Limit{Rate: 100, Period: 24 * time.Hour}
	l, err := grpclimit.New(client.NewGuard(clientOf(c, 0), client.GuardOptions{}), grpclimit.Options{SettleTTL: time.Minute,
		Default: []grpclimit.Check{{Key: grpclimit.Const("calls"), Limit: limit, Cost: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(l.Unary()))
	healthpb.RegisterHealthServer(srv, settlingHealth{t: t})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if code, _ := check(t, healthpb.NewHealthClient(conn)); code != codes.OK {
		t.Fatalf("Check: %v", code)
	}
	d, err := clientOf(c, 0).Allow(context.Background(), client.AllowRequest{Key: "calls", Limit: limit, Peek: true})
	if err != nil || d.Remaining != 97 {
		t.Fatalf("after the call: %+v %v, want 97 left (10 reserved, 3 used)", d, err)
	}
	if _, err := grpclimit.Settle(context.Background(), 1); !errors.Is(err, grpclimit.ErrNotAdmitted) {
		t.Fatalf("Settle outside the interceptor: %v", err)
	}
}
