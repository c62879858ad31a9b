package main

import (
	"context"
	"errors"
	"fmt"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// connsPerAddr is how many gRPC connections the callers share per address
// (a limitnode node, or the reference's service), as Envoy opens one per
// worker thread.
const connsPerAddr = 4

// grpcTarget calls ShouldRateLimit in benchDomain with the descriptors of
// its load, on limitnode's nodes or on envoyproxy/ratelimit alike.
type grpcTarget struct {
	env   *environment
	label string
	// cluster is the limitnode cluster called, or nil for the reference.
	cluster netCluster
	load    rlsLoad
	clients []ratelimitv3.RateLimitServiceClient // connsPerAddr per address, address by address
	addrs   int
}

// newGRPCTarget spreads the callers over conns: connsPerAddr connections
// to each address, address by address.
func newGRPCTarget(e *environment, label string, load rlsLoad, conns []grpc.ClientConnInterface) *grpcTarget {
	t := &grpcTarget{env: e, label: label, load: load, addrs: len(conns) / connsPerAddr}
	for _, c := range conns {
		t.clients = append(t.clients, ratelimitv3.NewRateLimitServiceClient(c))
	}
	return t
}

// dialNodes opens connsPerAddr connections to each node's gRPC API.
func dialNodes(nodes []benchNode) []grpc.ClientConnInterface {
	var conns []grpc.ClientConnInterface
	for _, n := range nodes {
		for range connsPerAddr {
			conns = append(conns, n.DialGRPC())
		}
	}
	return conns
}

func (t *grpcTarget) name() string { return t.label }

func (t *grpcTarget) servers() []serverProcess { return t.cluster.servers() }

func (t *grpcTarget) metricsNodes() []metricsNode { return metricsNodesOf(t.cluster) }

func (t *grpcTarget) where() string { return t.cluster.where() }

// errOverLimit is a denial where the load never goes over its limits.
var errOverLimit = errors.New("over the limit")

func (t *grpcTarget) do(ctx context.Context, caller, seq int) (int, error) {
	addr, conn := caller%t.addrs, (caller/t.addrs)%connsPerAddr
	req := &ratelimitv3.RateLimitRequest{Domain: benchDomainName, Descriptors: t.load.descriptors(t.env, caller, seq)}
	resp, err := t.clients[addr*connsPerAddr+conn].ShouldRateLimit(ctx, req)
	if err != nil {
		return 0, err
	}
	if len(resp.Statuses) != len(req.Descriptors) {
		return 0, fmt.Errorf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
	}
	for i, st := range resp.Statuses {
		if got := st.GetCurrentLimit().GetRequestsPerUnit(); got != t.load.requestsPerUnit() {
			return 0, fmt.Errorf("descriptor %d was decided against %d requests per unit, not benchDomain's %d", i, got, t.load.requestsPerUnit())
		}
	}
	switch {
	case resp.OverallCode == ratelimitv3.RateLimitResponse_OK:
	case resp.OverallCode == ratelimitv3.RateLimitResponse_OVER_LIMIT && t.load == loadFlood:
	case resp.OverallCode == ratelimitv3.RateLimitResponse_OVER_LIMIT:
		return 0, errOverLimit
	default:
		return 0, fmt.Errorf("overall code %s", resp.OverallCode)
	}
	return 1, nil
}
