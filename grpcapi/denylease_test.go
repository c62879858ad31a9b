package grpcapi_test

import (
	"context"
	"testing"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// TestEnvoyFloodsAreAnsweredFromDenyLeases: Envoy's calls on a spent
// descriptor, through a follower, are answered there from its deny lease
// (x-limitnode-leased) after the first denial; a domain change that raises
// the limit is honoured on every node once it is acknowledged.
func TestEnvoyFloodsAreAnsweredFromDenyLeases(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	putDomain(t, c, "domain: flood\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	req := &ratelimitv3.RateLimitRequest{Domain: "flood", Descriptors: []*ratelimitcommon.RateLimitDescriptor{{
		Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: "client", Value: "c1"}}}}}
	call := func(n *testcluster.Node) (ratelimitv3.RateLimitResponse_Code, bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var header metadata.MD
		resp, err := ratelimitv3.NewRateLimitServiceClient(n.DialGRPC()).ShouldRateLimit(ctx, req, grpc.Header(&header))
		if err != nil {
			t.Fatal(err)
		}
		return resp.OverallCode, len(header.Get("x-limitnode-leased")) > 0
	}
	follower := c.Followers()[0]
	if code, _ := call(follower); code != ratelimitv3.RateLimitResponse_OK {
		t.Fatalf("the first: %v", code)
	}
	leased := 0
	for range 50 {
		code, fromLease := call(follower)
		if code != ratelimitv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("a call on the spent descriptor: %v", code)
		}
		if fromLease {
			leased++
		}
	}
	if leased < 45 {
		t.Fatalf("%d of 50 denials came from the follower's lease; want all but the first few", leased)
	}
	for _, n := range c.Nodes {
		testenv.WaitFor(t, n.ID+" to answer from a lease", func() bool {
			code, fromLease := call(n)
			return code == ratelimitv3.RateLimitResponse_OVER_LIMIT && fromLease
		})
	}
	putDomain(t, c, "domain: flood\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 100}\n")
	for _, n := range c.Nodes {
		if code, fromLease := call(n); code != ratelimitv3.RateLimitResponse_OK {
			t.Fatalf("%s after the raise was acknowledged: %v (leased %v), want OK", n.ID, code, fromLease)
		}
	}
}
