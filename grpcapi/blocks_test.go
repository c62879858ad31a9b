package grpcapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/rls"
	"github.com/limitnode/limitnode/testcluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// TestABlockDeniesOnEveryPath blocks a key and an Envoy descriptor's
// counter through the leader, and asks every node on every path: /v1/allow,
// a batch, forward-auth and the rate limit service deny it and say why,
// without counting; once lifted, the very next request on every node is
// admitted, with the whole limit left.
func TestABlockDeniesOnEveryPath(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	putDomain(t, c, "domain: edge\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 2}\n")
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
	defer cancel()
	admin := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, leader.URL())
	if _, err := admin.PutPolicy(ctx, "per-user", client.Policy{Limit: &client.Limit{Rate: 2, Period: time.Hour}, KeyTemplate: "{user}"}); err != nil {
		t.Fatal(err)
	}
	counter := rls.CounterKey("edge", []rls.Entry{{Key: "client", Value: "c1"}}, nil)
	for _, key := range []string{"u1", counter} {
		if _, err := admin.PutBlock(ctx, key, time.Hour, "abuse desk ticket 7"); err != nil {
			t.Fatalf("block %q: %v", key, err)
		}
	}

	byPolicy := client.AllowRequest{Policy: "per-user", Dimensions: map[string]string{"user": "u1"}}
	paths := []struct {
		name string
		ask  func(n *testcluster.Node) (denied bool, why string)
	}{
		{"/v1/allow", func(n *testcluster.Node) (bool, string) {
			d, err := nodeClient(n).Allow(ctx, byPolicy)
			if err != nil {
				t.Fatalf("allow on %s: %v", n.ID, err)
			}
			return !d.Allowed, blockedReason(d.Wire().Blocked)
		}},
		{"a batch", func(n *testcluster.Node) (bool, string) {
			body := `{"requests":[{"key":"free","limit":{"rate":1000}},{"policy":"per-user","dimensions":{"user":"u1"}}]}`
			resp, err := testcluster.HTTPClient().Post(n.URL()+"/v1/allow/batch", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatalf("batch on %s: %v", n.ID, err)
			}
			defer resp.Body.Close()
			var out wire.BatchResponse
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Responses) != 2 || out.Responses[0].Status != http.StatusOK {
				t.Fatalf("batch on %s: %+v %v", n.ID, out, err)
			}
			item := out.Responses[1]
			return item.Status == http.StatusTooManyRequests, blockedReason(item.AllowResponse.Blocked)
		}},
		{"forward-auth", func(n *testcluster.Node) (bool, string) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/v1/forward-auth?policy=per-user&dim.user=header:X-User", nil)
			req.Header.Set("X-User", "u1")
			resp, err := testcluster.HTTPClient().Do(req)
			if err != nil {
				t.Fatalf("forward-auth on %s: %v", n.ID, err)
			}
			defer resp.Body.Close()
			var body wire.AllowResponse
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if body.Blocked != nil && body.Blocked.Key != "" {
				t.Errorf("forward-auth's answer names the key %q: a proxy may pass it to its client", body.Blocked.Key)
			}
			return resp.StatusCode == http.StatusTooManyRequests, blockedReason(body.Blocked)
		}},
		{"the rate limit service", func(n *testcluster.Node) (bool, string) {
			var header metadata.MD
			resp, err := ratelimitv3.NewRateLimitServiceClient(n.DialGRPC()).ShouldRateLimit(ctx,
				&ratelimitv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitcommon.RateLimitDescriptor{desc(1, "client", "c1")}}, grpc.Header(&header))
			if err != nil {
				t.Fatalf("ShouldRateLimit on %s: %v", n.ID, err)
			}
			why := ""
			if v := header.Get("x-limitnode-blocked"); len(v) == 1 {
				why = v[0]
			}
			return resp.OverallCode == ratelimitv3.RateLimitResponse_OVER_LIMIT, why
		}},
	}
	for _, p := range paths {
		for _, n := range c.Running() {
			for range 3 {
				if denied, why := p.ask(n); !denied || why != "abuse desk ticket 7" {
					t.Fatalf("%s on %s: denied %v, why %q; want denied for the block's reason", p.name, n.ID, denied, why)
				}
			}
		}
	}
	if _, err := admin.Key(ctx, "u1"); err == nil {
		t.Fatal("the blocked requests left state on the key")
	}

	for _, key := range []string{"u1", counter} {
		if _, err := admin.DeleteBlock(ctx, key); err != nil {
			t.Fatalf("lift %q: %v", key, err)
		}
	}
	// Lifting waited out the deny leases: no node may still deny.
	for _, n := range c.Running()[:2] {
		if d, err := nodeClient(n).Allow(ctx, byPolicy); err != nil || !d.Allowed {
			t.Fatalf("allow on %s right after the lift: %+v %v", n.ID, d, err)
		}
		resp, err := ratelimitv3.NewRateLimitServiceClient(n.DialGRPC()).ShouldRateLimit(ctx,
			&ratelimitv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitcommon.RateLimitDescriptor{desc(1, "client", "c1")}})
		if err != nil || resp.OverallCode != ratelimitv3.RateLimitResponse_OK {
			t.Fatalf("ShouldRateLimit on %s right after the lift: %v %v", n.ID, resp, err)
		}
	}
}

// nodeClient is a client of one node.
func nodeClient(n *testcluster.Node) *client.Client {
	return client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, n.URL())
}

// blockedReason is the reason of an answer's block, or "" without one.
func blockedReason(b *wire.Blocked) string {
	if b == nil {
		return ""
	}
	return b.Reason
}
