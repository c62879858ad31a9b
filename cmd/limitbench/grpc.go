package main

import (
	"context"
	"errors"
	"fmt"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// connsPerAddr is how many gRPC connections the callers share per address
// (a limitnode node, or the reference's service), as Envoy opens one per
// worker thread.
const connsPerAddr = 4

// grpcTarget calls ShouldRateLimit in its load's domain with the
// descriptors of its load, on limitnode's nodes or on envoyproxy/ratelimit
// alike.
type grpcTarget struct {
	env   *environment
	label string
	// cluster is the limitnode cluster called, or nil for the reference.
	cluster netCluster
	load    rlsLoad
	clients []ratelimitv3.RateLimitServiceClient // connsPerAddr per address, address by address
	addrs   int
	// tally counts the answers from shares, of the hot loads (the others
	// read no response header).
	tally outcomeTally
}

func (t *grpcTarget) outcomes() *outcomeTally { return &t.tally }

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
	req := &ratelimitv3.RateLimitRequest{Domain: t.load.domain(), Descriptors: t.load.descriptors(t.env, caller, seq)}
	var opts []grpc.CallOption
	var header metadata.MD
	hot := t.load == loadHot || t.load == loadHotShared
	if hot {
		opts = append(opts, grpc.Header(&header))
	}
	resp, err := t.clients[addr*connsPerAddr+conn].ShouldRateLimit(ctx, req, opts...)
	if err != nil {
		return 0, err
	}
	if hot {
		t.tally.note(resp.OverallCode == ratelimitv3.RateLimitResponse_OVER_LIMIT, len(header.Get("x-limitnode-shared")) > 0)
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
