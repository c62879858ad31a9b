package main

import (
	"context"
	"fmt"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/rls"
	"github.com/limitnode/limitnode/testcluster"
)

// benchDomain is the rate limit service domain of the grpc targets: a
// per-client limit and a global one, token buckets as generous as
// benchLimit, so that a ShouldRateLimit call decides what an http-multi
// call decides.
const benchDomain = `domain: bench
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: token_bucket}
  - key: global
    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: token_bucket}
`

// putBenchDomain stores benchDomain in the cluster.
func putBenchDomain(c *testcluster.Cluster) error {
	conf, perr := rls.Parse([]byte(benchDomain))
	if perr != nil {
		return perr
	}
	if err := c.WaitLeader().Node().PutRLSConfig(context.Background(), conf); err != nil {
		return fmt.Errorf("store the bench domain: %w", err)
	}
	return nil
}

// connsPerNode is how many gRPC connections the callers share per node, as
// Envoy opens one per worker thread.
const connsPerNode = 4

// grpcTarget calls ShouldRateLimit with two descriptors per request (the
// caller's key and a global one), as Envoy's rate limit filter would with
// two actions.
type grpcTarget struct {
	env     *environment
	label   string
	clients []ratelimitv3.RateLimitServiceClient // connsPerNode per node, node by node
	nodes   int
}

func newGRPCTarget(e *environment, label string, nodes []*testcluster.Node) *grpcTarget {
	t := &grpcTarget{env: e, label: label, nodes: len(nodes)}
	for _, n := range nodes {
		for range connsPerNode {
			t.clients = append(t.clients, ratelimitv3.NewRateLimitServiceClient(n.DialGRPC()))
		}
	}
	return t
}

func (t *grpcTarget) name() string { return t.label }

func (t *grpcTarget) do(ctx context.Context, caller, seq int) (int, error) {
	node, conn := caller%t.nodes, (caller/t.nodes)%connsPerNode
	resp, err := t.clients[node*connsPerNode+conn].ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{
		Domain: "bench",
		Descriptors: []*ratelimitcommon.RateLimitDescriptor{
			{Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: "client", Value: t.env.key(caller, seq)}}},
			{Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: "global", Value: "all"}}},
		},
	})
	if err != nil {
		return 0, err
	}
	if resp.OverallCode != ratelimitv3.RateLimitResponse_OK {
		return 0, fmt.Errorf("over the limit")
	}
	return 1, nil
}
