package grpcapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/testcluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// hotDomain has a descriptor with local_shares and one without, each a
// budget of 300 that barely refills during a test (1 an hour).
const hotDomain = `
domain: hot
descriptors:
  - key: api_key
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket, burst: 300, local_shares: {ttl: 1s}}
  - key: plain
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket, burst: 300}
`

// hammer sends a query of ds to every node from callers goroutines each, n
// queries a caller, and counts per node the admissions and those answered
// from a share (x-limitnode-shared).
func hammer(t *testing.T, nodes []*testcluster.Node, callers, n int, ds ...*ratelimitcommon.RateLimitDescriptor) (admitted, shared []int64) {
	t.Helper()
	a, s := make([]atomic.Int64, len(nodes)), make([]atomic.Int64, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		client := ratelimitv3.NewRateLimitServiceClient(node.DialGRPC())
		for range callers {
			wg.Go(func() {
				for range n {
					var md metadata.MD
					resp, err := client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: "hot", Descriptors: ds}, grpc.Header(&md))
					if err != nil {
						continue // no answer in time on a loaded machine: not acknowledged as admitted
					}
					if resp.OverallCode == ratelimitv3.RateLimitResponse_OK {
						a[i].Add(1)
						if len(md.Get("x-limitnode-shared")) > 0 {
							s[i].Add(1)
						}
					}
				}
			})
		}
	}
	wg.Wait()
	admitted, shared = make([]int64, len(nodes)), make([]int64, len(nodes))
	for i := range nodes {
		admitted[i], shared[i] = a[i].Load(), s[i].Load()
	}
	return admitted, shared
}

// shareAdmissions reads limitnode_share_admissions_total from a node's
// /metrics.
func shareAdmissions(t *testing.T, n *testcluster.Node) int64 {
	t.Helper()
	resp, err := testcluster.HTTPClient().Get(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^limitnode_share_admissions_total (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return int64(v)
}

// TestAHotDescriptorIsAnsweredFromSharesOverGRPC: one descriptor whose
// rate_limit has local_shares, hammered through ShouldRateLimit on all
// three nodes with three times its budget: the followers admit from shares
// (their answers say so, and their metrics count them), all nodes together
// admit no more than the limit, and /v1/stats lists the shares under the
// domain ("rls/hot"). The same descriptor without local_shares, hammered
// the same, and a query of the shared descriptor with another, are never
// answered from a share.
func TestAHotDescriptorIsAnsweredFromSharesOverGRPC(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	putDomain(t, c, hotDomain)
	c.WaitConverged()
	nodes := c.Running()
	leader := c.WaitLeader()

	admitted, shared := hammer(t, nodes, 4, 75, desc(-1, "api_key", "k1"))
	var total int64
	for i, n := range nodes {
		total += admitted[i]
		t.Logf("%s: %d admitted, %d from shares", n.ID, admitted[i], shared[i])
		if n != leader && shared[i] == 0 {
			t.Errorf("follower %s answered nothing from a share", n.ID)
		}
		if n != leader && shareAdmissions(t, n) < shared[i] {
			t.Errorf("follower %s counts %d admissions from shares in its metrics, fewer than the %d it answered", n.ID, shareAdmissions(t, n), shared[i])
		}
	}
	if total > 300 {
		t.Errorf("%d admitted through all nodes, more than the limit of 300", total)
	}

	// The shares outstanding show in the statistics under the domain:
	// asked right after a follower took one, until one is seen.
	follower := c.Followers()[0]
	client := ratelimitv3.NewRateLimitServiceClient(follower.DialGRPC())
	listed := false
	for i := 0; i < 50 && !listed; i++ {
		if _, err := client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: "hot", Descriptors: []*ratelimitcommon.RateLimitDescriptor{desc(-1, "api_key", "k2")}}); err != nil {
			continue
		}
		listed = statsListShares(t, follower, "rls/hot")
	}
	if !listed {
		t.Error("/v1/stats never listed a share of rls/hot")
	}

	// An attacker's version: the descriptor without local_shares, and a
	// query of two descriptors, one of them shared, are decided by the
	// leader every time.
	before := make([]int64, len(nodes))
	for i, n := range nodes {
		before[i] = shareAdmissions(t, n)
	}
	for _, ds := range [][]*ratelimitcommon.RateLimitDescriptor{
		{desc(-1, "plain", "k1")},
		{desc(-1, "api_key", "k3"), desc(-1, "plain", "k3")},
	} {
		admitted, shared := hammer(t, nodes, 2, 30, ds...)
		var total int64
		for i, n := range nodes {
			total += admitted[i]
			if shared[i] != 0 {
				t.Errorf("%v: %s answered %d from shares", ds, n.ID, shared[i])
			}
		}
		if total > 300 {
			t.Errorf("%v: %d admitted, more than 300", ds, total)
		}
	}
	for i, n := range nodes {
		if after := shareAdmissions(t, n); after != before[i] {
			t.Errorf("%s: share admissions went from %d to %d on queries without consent", n.ID, before[i], after)
		}
	}
}

// statsListShares reports whether n's /v1/stats lists shares outstanding
// under owner.
func statsListShares(t *testing.T, n *testcluster.Node, owner string) bool {
	t.Helper()
	resp, err := testcluster.HTTPClient().Get(n.URL() + "/v1/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		LocalShares []struct {
			Policy string `json:"policy"`
			Shares int    `json:"shares"`
			Units  int64  `json:"units"`
		} `json:"local_shares"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.LocalShares {
		if s.Policy == owner && s.Shares > 0 && s.Units > 0 {
			return true
		}
	}
	return false
}

// TestADomainChangeOutlastsTheShares: a follower holds shares of a hot
// descriptor; the domain lowers its limit through the leader, and once that
// is acknowledged the follower answers under the new limit only, shares and
// all (a share granted under the old one has ended: the change waited for
// it), and admits no more than the new limit allows.
func TestADomainChangeOutlastsTheShares(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	put := func(perHour int) {
		putDomain(t, c, fmt.Sprintf("domain: hot\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: hour, requests_per_unit: %d, algorithm: token_bucket, local_shares: {ttl: 1s}}\n", perHour))
	}
	put(1000)
	c.WaitConverged()
	client := ratelimitv3.NewRateLimitServiceClient(c.Followers()[0].DialGRPC())
	call := func() (*ratelimitv3.RateLimitResponse, bool) {
		t.Helper()
		var md metadata.MD
		resp, err := client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: "hot", Descriptors: []*ratelimitcommon.RateLimitDescriptor{desc(-1, "api_key", "k")}}, grpc.Header(&md))
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp, len(md.Get("x-limitnode-shared")) > 0
	}
	shared := false
	for i := 0; i < 50 && !shared; i++ {
		_, shared = call()
	}
	if !shared {
		t.Fatal("the follower took no share")
	}
	put(5)
	admitted := 0
	for range 10 {
		resp, fromShare := call()
		if got := resp.Statuses[0].GetCurrentLimit().GetRequestsPerUnit(); got != 5 {
			t.Fatalf("after the change was acknowledged: decided under %d an hour (from a share: %v); want the new limit", got, fromShare)
		}
		if resp.OverallCode == ratelimitv3.RateLimitResponse_OK {
			admitted++
		}
	}
	if admitted > 5 {
		t.Fatalf("%d admitted under the new limit of 5", admitted)
	}
}

// collidingDomain has, twice, a descriptor with a generous limit and one
// with a strict limit whose entries, written one after the other with
// "=" between key and value, read the same: a key holding "=", and a
// value holding a NUL and "=" against two entries. Both have local_shares.
const collidingDomain = `
domain: hot
descriptors:
  - key: "a=b"
    value: c
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: token_bucket, local_shares: {ttl: 1s}}
  - key: a
    value: "b=c"
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: token_bucket, local_shares: {ttl: 1s}}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: token_bucket, local_shares: {ttl: 1s}}
    descriptors:
      - key: plan
        value: free
        rate_limit: {unit: hour, requests_per_unit: 3, algorithm: token_bucket, local_shares: {ttl: 1s}}
`

// TestAShareAnswersOnlyItsOwnDescriptor: a follower holds a share of a
// generous descriptor; an attacker's query of another descriptor, whose
// entries differ but read the same once joined (a key or a value that
// holds the separators), is never answered from that share: it is decided
// under its own strict limit, and admitted no more than that limit allows.
func TestAShareAnswersOnlyItsOwnDescriptor(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	putDomain(t, c, collidingDomain)
	c.WaitConverged()
	client := ratelimitv3.NewRateLimitServiceClient(c.Followers()[0].DialGRPC())
	call := func(d *ratelimitcommon.RateLimitDescriptor) (*ratelimitv3.RateLimitResponse, bool) {
		t.Helper()
		var md metadata.MD
		resp, err := client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: "hot", Descriptors: []*ratelimitcommon.RateLimitDescriptor{d}}, grpc.Header(&md))
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp, len(md.Get("x-limitnode-shared")) > 0
	}
	for _, tc := range []struct {
		name             string
		generous, strict *ratelimitcommon.RateLimitDescriptor
	}{
		{"a key holding =", desc(-1, "a=b", "c"), desc(-1, "a", "b=c")},
		{"a value holding NUL", desc(-1, "user", "x\x00plan=free"), desc(-1, "user", "x", "plan", "free")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admitted := 0
			for range 10 {
				shared := false
				for i := 0; i < 50 && !shared; i++ {
					_, shared = call(tc.generous)
				}
				if !shared {
					t.Fatal("the follower took no share of the generous descriptor")
				}
				resp, fromShare := call(tc.strict)
				if got := resp.Statuses[0].GetCurrentLimit().GetRequestsPerUnit(); got != 3 {
					t.Fatalf("the strict descriptor was decided under %d an hour (from a share: %v); want its own 3", got, fromShare)
				}
				if resp.OverallCode == ratelimitv3.RateLimitResponse_OK {
					admitted++
				}
			}
			if admitted > 3 {
				t.Fatalf("%d admitted of the strict descriptor, whose limit is 3 an hour", admitted)
			}
		})
	}
}
