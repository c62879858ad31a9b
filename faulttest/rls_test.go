package faulttest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/rls"
	"github.com/limitnode/limitnode/testcluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The gRPC path of a run: Envoy's ShouldRateLimit on three counters of one
// domain. The limit is a fixed window of a year, so that a run stays in one
// window and a counter's state is the hits it admitted: an operation whose
// outcome is unknown (Envoy's requests carry no ID to retry with) is then
// modelled exactly as "consumed, or not". The third counter's rate_limit
// has local_shares, so nodes admit it from shares they hold.
const (
	rlsDomain = "lin"
	rlsRate   = 150
	rlsShared = "hot" // the tenant whose limit has local_shares
	// rlsSharedRate is the shared tenant's: low enough that a run spends
	// it, so that its denials follow admissions from shares.
	rlsSharedRate = 40
)

// rlsRateOf is the limit of the counter of tenant value.
func rlsRateOf(value string) int64 {
	if value == rlsShared {
		return rlsSharedRate
	}
	return rlsRate
}

var (
	rlsConfig = fmt.Sprintf("domain: %s\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: year, requests_per_unit: %d}\n"+
		"  - key: tenant\n    value: %s\n    rate_limit: {unit: year, requests_per_unit: %d, local_shares: {}}\n", rlsDomain, rlsRate, rlsShared, rlsSharedRate)
	rlsValues = []string{"a", "b", rlsShared}
)

type rlsInput struct {
	Value string // the tenant: which counter
	Cost  int64
	Via   string
}

type rlsOutput struct {
	Known     bool // false: the call failed, and may or may not have counted
	Allowed   bool
	Remaining int64
	AtNanos   int64
	// Leased: a denial answered from a deny lease; what remains is that of
	// the denial it repeats (others may have consumed since).
	Leased bool
	// Shared: an admission answered from a share a node holds.
	Shared bool
}

// rlsModel is the sequential specification of one counter: the hits it
// admitted, never more than its rate (rlsRateOf). For the shared tenant, whose nodes
// take units ahead in shares the callers never see, an admission must fit
// as for the others, but what remains is not checked (an estimate on an
// answer from a share; on the log's, it leaves out what shares hold), and
// a denial may come while units are held in shares elsewhere (the
// under-admission shares cost).
var rlsModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byValue := map[string][]porcupine.Operation{}
		for _, op := range history {
			v := op.Input.(rlsInput).Value
			byValue[v] = append(byValue[v], op)
		}
		var out [][]porcupine.Operation
		for _, v := range slices.Sorted(func(yield func(string) bool) {
			for v := range byValue {
				if !yield(v) {
					return
				}
			}
		}) {
			out = append(out, byValue[v])
		}
		return out
	},
	Init: func() []any { return []any{int64(0)} },
	Step: func(state, input, output any) []any {
		used, in, out := state.(int64), input.(rlsInput), output.(rlsOutput)
		rate := rlsRateOf(in.Value)
		fits := used+in.Cost <= rate
		switch {
		case in.Value == rlsShared && out.Known && out.Allowed && fits:
			return []any{used + in.Cost}
		case in.Value == rlsShared && out.Known && !out.Allowed:
			return []any{used}
		case !out.Known && fits:
			return []any{used, used + in.Cost}
		case !out.Known:
			return []any{used}
		case out.Allowed && fits && out.Remaining == rate-used-in.Cost:
			return []any{used + in.Cost}
		case !out.Allowed && !fits && out.Remaining == rate-used:
			return []any{used}
		case out.Leased && !out.Allowed && !fits && out.Remaining >= rate-used:
			return []any{used}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(rlsInput), output.(rlsOutput)
		if !out.Known {
			return fmt.Sprintf("tenant %s cost %d via %s → unknown", in.Value, in.Cost, in.Via)
		}
		return fmt.Sprintf("tenant %s cost %d via %s → allowed=%v remaining=%d shared=%v", in.Value, in.Cost, in.Via, out.Allowed, out.Remaining, out.Shared)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("used %d", state.(int64)) },
}

// rlsClients connects to every node's gRPC API and stores the run's domain.
func rlsClients(t *testing.T, c *testcluster.Cluster) []ratelimitv3.RateLimitServiceClient {
	t.Helper()
	conf, perr := rls.Parse([]byte(rlsConfig))
	if perr != nil {
		t.Fatal(perr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
	defer cancel()
	if err := c.WaitLeader().Node().PutRLSConfig(ctx, conf); err != nil {
		t.Fatalf("put the run's domain: %v", err)
	}
	var out []ratelimitv3.RateLimitServiceClient
	for _, n := range c.Nodes {
		out = append(out, ratelimitv3.NewRateLimitServiceClient(n.DialGRPC()))
	}
	return out
}

// rlsAttempt asks once; an error means the outcome is unknown.
func rlsAttempt(ctx context.Context, client ratelimitv3.RateLimitServiceClient, value string, cost int64) rlsOutput {
	var header metadata.MD
	resp, err := client.ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: rlsDomain, Descriptors: []*ratelimitcommon.RateLimitDescriptor{{
		Entries:    []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: "tenant", Value: value}},
		HitsAddend: wrapperspb.UInt64(uint64(cost)),
	}}}, grpc.Header(&header))
	if err != nil {
		return rlsOutput{}
	}
	at, _ := strconv.ParseInt(first(header.Get("x-limitnode-decided-at")), 10, 64)
	return rlsOutput{Known: true, Allowed: resp.OverallCode == ratelimitv3.RateLimitResponse_OK,
		Remaining: int64(resp.Statuses[0].LimitRemaining), AtNanos: at, Leased: first(header.Get("x-limitnode-leased")) == "true",
		Shared: first(header.Get("x-limitnode-shared")) == "true"}
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// checkRLSRun checks the gRPC operations of a run: linearizable against
// rlsModel, and after every node restarted, each counter holds what the
// acknowledged admissions and some of the unknown outcomes add up to (the
// shared tenant's at least the acknowledged: units a killed node held in a
// share are spent for good).
func checkRLSRun(t *testing.T, c *testcluster.Cluster, seed uint64, history []porcupine.Operation) {
	t.Helper()
	period, _ := rls.UnitPeriod("YEAR")
	windows := map[int64]bool{}
	for _, op := range history {
		if out := op.Output.(rlsOutput); out.Known {
			windows[out.AtNanos/int64(period)] = true
		}
	}
	if len(windows) > 1 {
		t.Logf("seed %d: the run crossed a year's window boundary; its gRPC operations are not checked", seed)
		return
	}
	model := rlsModel.ToModel()
	if result, _ := porcupine.CheckOperationsVerbose(model, history, 2*time.Minute); result != porcupine.Ok {
		t.Fatalf("seed %d: the history of %d gRPC operations is %v", seed, len(history), result)
	}
	known, unknown := map[string]int64{}, map[string]int64{}
	shared := 0
	for _, op := range history {
		in, out := op.Input.(rlsInput), op.Output.(rlsOutput)
		if out.Shared {
			shared++
		}
		switch {
		case !out.Known:
			unknown[in.Value] += in.Cost
		case out.Allowed:
			known[in.Value] += in.Cost
		}
	}
	t.Logf("seed %d: %d gRPC admissions of tenant %s answered from shares", seed, shared, rlsShared)
	client := ratelimitv3.NewRateLimitServiceClient(c.Nodes[0].DialGRPC())
	for _, v := range rlsValues {
		var out rlsOutput
		testenv.WaitFor(t, "an answer to a peek of tenant "+v+" after the restart", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			out = rlsAttempt(ctx, client, v, 0)
			return out.Known
		})
		if used := rlsRateOf(v) - out.Remaining; used < known[v] || used > known[v]+unknown[v] && v != rlsShared {
			t.Fatalf("tenant %s after restarting every node: %d used; acknowledged %d, unknown %d", v, used, known[v], unknown[v])
		}
	}
}
