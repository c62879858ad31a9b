package grpcapi_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/testcluster"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// envoyPage returns docs/envoy.md, where users read the Envoy configuration.
func envoyPage(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../docs/envoy.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// between returns the text between the first start after from and the
// next end.
func between(t *testing.T, text, from, start, end string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, from)
	if ok {
		_, after, ok = strings.Cut(after, start)
	}
	if ok {
		after, _, ok = strings.Cut(after, end)
	}
	if !ok {
		t.Fatalf("docs/envoy.md has no %q ... %q after %q", start, end, from)
	}
	return after
}

// validated unpacks a typed_config and checks it against Envoy's validate
// rules (protoc-gen-validate's, which Envoy enforces at load).
func validated(t *testing.T, what string, a *anypb.Any) proto.Message {
	t.Helper()
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	return m
}

// TestEnvoyPageConfiguration reads the Envoy configuration of
// docs/envoy.md with Envoy's own message types and validation rules, checks
// that it asks limitnode's cluster over HTTP/2 for the domain the page
// configures, and sends the request the page says this Envoy sends to a
// 3-node cluster through a follower: three logins pass, the fourth is over
// the limit.
func TestEnvoyPageConfiguration(t *testing.T) {
	t.Parallel()
	text := envoyPage(t)
	var tree any
	if err := yaml.Unmarshal([]byte(between(t, text, "## Envoy's side", "```yaml\n", "```")), &tree); err != nil {
		t.Fatal(err)
	}
	jsonConfig, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	var boot bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(jsonConfig, &boot); err != nil {
		t.Fatalf("Envoy would not load the page's configuration: %v", err)
	}
	if err := boot.ValidateAll(); err != nil {
		t.Fatalf("the page's configuration breaks Envoy's rules: %v", err)
	}
	clusters := map[string]bool{}
	for _, c := range boot.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = true
		for name, opts := range c.GetTypedExtensionProtocolOptions() {
			m := validated(t, name, opts)
			if c.GetName() == "limitnode" {
				if p, ok := m.(*upstreamhttpv3.HttpProtocolOptions); !ok || p.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
					t.Fatal("the limitnode cluster does not speak HTTP/2, which gRPC needs")
				}
			}
		}
	}
	var filter *ratelimitfilterv3.RateLimit
	for _, l := range boot.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm, ok := validated(t, f.GetName(), f.GetTypedConfig()).(*hcmv3.HttpConnectionManager)
				if !ok {
					continue
				}
				for _, hf := range hcm.GetHttpFilters() {
					if rl, ok := validated(t, hf.GetName(), hf.GetTypedConfig()).(*ratelimitfilterv3.RateLimit); ok {
						filter = rl
					}
				}
			}
		}
	}
	if filter == nil {
		t.Fatal("the page's configuration has no rate limit filter")
	}
	service := filter.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if filter.GetDomain() != "edge" || !clusters[service] || service != "limitnode" {
		t.Fatalf("the filter asks cluster %q for domain %q", service, filter.GetDomain())
	}

	script := between(t, text, "# Envoy: the gRPC rate limit service", "```sh\n", "```")
	c := testcluster.Start(t, 3)
	putDomain(t, c, between(t, script, "cat > edge.yaml", "<<'YAML'\n", "YAML\n"))
	var req ratelimitv3.RateLimitRequest
	if err := protojson.Unmarshal([]byte(between(t, script, "./grpcurl -plaintext -d", "'", "'")), &req); err != nil {
		t.Fatalf("the page's request: %v", err)
	}
	client := ratelimitv3.NewRateLimitServiceClient(c.Followers()[0].DialGRPC())
	for i, want := range []ratelimitv3.RateLimitResponse_Code{ratelimitv3.RateLimitResponse_OK, ratelimitv3.RateLimitResponse_OK,
		ratelimitv3.RateLimitResponse_OK, ratelimitv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := client.ShouldRateLimit(context.Background(), &req)
		if err != nil || resp.OverallCode != want {
			t.Fatalf("login %d: %v %v, want %v", i+1, resp.GetOverallCode(), err, want)
		}
		if want == ratelimitv3.RateLimitResponse_OVER_LIMIT && resp.Statuses[1].GetCurrentLimit().GetName() != "login" {
			t.Fatalf("the denying status %v, want the login limit", resp.Statuses[1])
		}
	}
}
