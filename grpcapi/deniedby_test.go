package grpcapi_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/testcluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// TestARateLimitServiceDenialIsExplained: Envoy's answer names the
// descriptor, its limit and the domain's version that denied it, in the
// headers for the client, the call's metadata and the dynamic metadata for
// access logs; a changed domain carries a later version.
func TestARateLimitServiceDenialIsExplained(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	const domain = "domain: edge\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 1, name: per-client}\n"
	putDomain(t, c, domain)
	rl := ratelimitv3.NewRateLimitServiceClient(c.Followers()[0].DialGRPC())
	ctx := context.Background()
	call := func() (*ratelimitv3.RateLimitResponse, metadata.MD) {
		t.Helper()
		var header metadata.MD
		resp, err := rl.ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: "edge",
			Descriptors: []*ratelimitcommon.RateLimitDescriptor{desc(1, "route", "/"), desc(1, "client", "c1")}}, grpc.Header(&header))
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp, header
	}
	if resp, header := call(); resp.OverallCode != ratelimitv3.RateLimitResponse_OK || len(header.Get("x-limitnode-denied-by")) > 0 || resp.DynamicMetadata != nil {
		t.Fatalf("an admission: %v, metadata %v", resp, header)
	}
	version := func() uint64 {
		t.Helper()
		resp, header := call()
		if resp.OverallCode != ratelimitv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("the second hit of 1 an hour: %v", resp.OverallCode)
		}
		var fromHeaders string
		for _, h := range resp.ResponseHeadersToAdd {
			if h.Key == "Limitnode-Denied-By" {
				fromHeaders = h.Value
			}
		}
		want := `"rls/edge";descriptor=1;version=`
		if !strings.HasPrefix(fromHeaders, want) || !strings.HasSuffix(fromHeaders, ";cause=limit;algorithm=fixed_window;rate=1;period_ms=3600000") {
			t.Fatalf("Limitnode-Denied-By %q, want %s<n>;cause=limit and the limit", fromHeaders, want)
		}
		if got := header.Get("x-limitnode-denied-by"); len(got) != 1 || got[0] != fromHeaders {
			t.Fatalf("the call's metadata %v, want the header %q", got, fromHeaders)
		}
		by := resp.DynamicMetadata.GetFields()["denied_by"].GetStructValue().GetFields()
		if by["descriptor"].GetNumberValue() != 1 || by["name"].GetStringValue() != "per-client" || by["cause"].GetStringValue() != "limit" || by["policy"].GetStringValue() != "rls/edge" {
			t.Fatalf("dynamic_metadata %v", resp.DynamicMetadata)
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(fromHeaders, want), ";")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 || by["policy_version"].GetNumberValue() != float64(n) {
			t.Fatalf("version %q in the header, %v in the metadata", v, by["policy_version"])
		}
		return n
	}
	first := version()
	if again := version(); again != first {
		t.Fatalf("two denials under one configuration name versions %d and %d", first, again)
	}
	putDomain(t, c, domain)
	if later := version(); later <= first {
		t.Fatalf("the domain put again has version %d, want later than %d", later, first)
	}
}

// TestAPenaltyOnTheRateLimitService: the domain's YAML extension blocks a
// descriptor's counter denied often; every node then denies it for the
// penalty, and says so.
func TestAPenaltyOnTheRateLimitService(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	putDomain(t, c, "domain: edge\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 1, penalty: {denials: 2, within: 1m, block_for: 1h}}\n")
	ctx := context.Background()
	call := func(n *testcluster.Node) (*ratelimitv3.RateLimitResponse, metadata.MD) {
		t.Helper()
		var header metadata.MD
		resp, err := ratelimitv3.NewRateLimitServiceClient(n.DialGRPC()).ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: "edge",
			Descriptors: []*ratelimitcommon.RateLimitDescriptor{desc(1, "client", "c1")}}, grpc.Header(&header))
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp, header
	}
	follower := c.Followers()[0]
	for i := range 3 {
		if resp, header := call(follower); (resp.OverallCode == ratelimitv3.RateLimitResponse_OK) != (i == 0) || len(header.Get("x-limitnode-blocked")) > 0 {
			t.Fatalf("hit %d: %v %v", i+1, resp.OverallCode, header)
		}
	}
	for _, n := range c.Running() {
		resp, header := call(n)
		by := header.Get("x-limitnode-denied-by")
		if resp.OverallCode != ratelimitv3.RateLimitResponse_OVER_LIMIT || len(header.Get("x-limitnode-blocked")) != 1 || len(by) != 1 || !strings.Contains(by[0], ";cause=penalty;") {
			t.Fatalf("%s after the penalty: %v, metadata %v", n.ID, resp.OverallCode, header)
		}
		if d := resp.Statuses[0].DurationUntilReset.AsDuration(); d < 50*time.Minute {
			t.Fatalf("%s: duration_until_reset %v, want the block's hour", n.ID, d)
		}
	}
}
