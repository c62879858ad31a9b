package faulttest

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/rls"
	"github.com/limitnode/limitnode/testcluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// sharedDomain has a descriptor with local_shares for each limit of
// shareLimits, spelled as the YAML spells them.
const sharedDomain = `
domain: shared
descriptors:
  - key: k
    value: shared-tb
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket, burst: 50, local_shares: {ttl: 300ms}}
  - key: k
    value: shared-fw
    rate_limit: {unit: second, requests_per_unit: 100, local_shares: {ttl: 300ms}}
  - key: k
    value: shared-log
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: sliding_window_log, local_shares: {ttl: 300ms}}
`

// TestRLSSharesHoldTheLimitUnderFaults is TestSharesHoldTheLimitUnderFaults
// for Envoy's callers: descriptors whose rate_limit has local_shares,
// queried with ShouldRateLimit through every node at several times their
// budget while the nemesis kills holders, cuts them off, skews clocks and
// hands leadership over. What was acknowledged as admitted (OK, at the
// cluster time the answer names: for an answer from a share, no earlier
// than the true one) must stay within each limit over every interval, and
// the nodes must have answered some of it from shares.
func TestRLSSharesHoldTheLimitUnderFaults(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitConverged()
	conf, perr := rls.Parse([]byte(sharedDomain))
	if perr != nil {
		t.Fatal(perr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
	err := c.WaitLeader().Node().PutRLSConfig(ctx, conf)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	c.WaitConverged()
	var clients []ratelimitv3.RateLimitServiceClient
	for _, n := range c.Nodes {
		clients = append(clients, ratelimitv3.NewRateLimitServiceClient(n.DialGRPC()))
	}
	keys := []string{"shared-tb", "shared-fw", "shared-log"}
	run := newShareRun()
	run.clients(9, 5, func(rng *rand.Rand) {
		key, node := keys[rng.IntN(len(keys))], rng.IntN(len(clients))
		cost := 1 + rng.Int64N(3)
		var header metadata.MD
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+rng.IntN(500))*time.Millisecond)
		resp, err := clients[node].ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: "shared", Descriptors: []*ratelimitcommon.RateLimitDescriptor{{
			Entries:    []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: "k", Value: key}},
			HitsAddend: wrapperspb.UInt64(uint64(cost)),
		}}}, grpc.Header(&header))
		cancel()
		if err != nil {
			time.Sleep(5 * time.Millisecond)
			return
		}
		if resp.OverallCode != ratelimitv3.RateLimitResponse_OK {
			return
		}
		at, perr := strconv.ParseInt(first(header.Get("x-limitnode-decided-at")), 10, 64)
		if perr != nil {
			t.Errorf("an admission without its time: %v", header)
			return
		}
		run.record(key, at, cost, first(header.Get("x-limitnode-shared")) == "true")
	})
	shareNemesis(c, rand.New(rand.NewPCG(17, 19)), 8*time.Second)
	run.finish(t, keys)
}
