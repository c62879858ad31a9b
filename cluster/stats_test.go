package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// deniedEntry is an applied entry of one request per key, each denied on
// its only check.
func deniedEntry(now int64, keys ...string) appliedEntry {
	cmd := &fsm.AllowCommand{NowNanos: now}
	resp := &fsm.Response{}
	for _, k := range keys {
		cmd.Requests = append(cmd.Requests, fsm.Request{Checks: []fsm.Check{{Key: k, Policy: "p-" + k[:1]}}})
		resp.Results = append(resp.Results, fsm.Result{Checks: []fsm.CheckResult{{Decision: algorithms.Decision{Limit: 10}}}})
	}
	return appliedEntry{cmd, resp}
}

// TestStatsTopKeysOfASkewedTrace feeds the recorder a Zipf-distributed
// trace of denials and checks /v1/stats' top keys against the exact
// counts of the last minute: each count within its error, each error
// within the bound, and the true top 10 reported in order wherever the
// guarantee decides their order (true counts more than the bound apart).
func TestStatsTopKeysOfASkewedTrace(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	defer r.close()
	rng := rand.New(rand.NewPCG(7, 11))
	zipf := rand.NewZipf(rng, 1.1, 1, 50_000)
	const start, n = int64(1_800_000_000) * int64(time.Second), 300_000
	type denial struct {
		at  int64
		key string
	}
	trace := make([]denial, n)
	for i := range trace {
		trace[i] = denial{start + int64(i)*int64(90*time.Second)/n, fmt.Sprintf("k%d", zipf.Uint64())}
		r.fold(deniedEntry(trace[i].at, trace[i].key))
	}
	// The window is the 10-second slot holding the last time and the five
	// before it.
	now := trace[n-1].at
	windowStart := now - now%int64(statsTopSlot) - 5*int64(statsTopSlot)
	exact := map[string]int64{}
	for _, d := range trace {
		if d.at >= windowStart {
			exact[d.key]++
		}
	}
	st := r.snapshot(contract.StatsTopCounters * 6)
	if st.TopErrorBound <= 0 || st.TopErrorBound > n/contract.StatsTopCounters {
		t.Fatalf("bound %d", st.TopErrorBound)
	}
	listed := map[string]contract.TopCount{}
	for _, c := range st.TopDeniedKeys {
		listed[c.Name] = c
		if truth := exact[c.Name]; c.Count-c.Error > truth || truth > c.Count || c.Error > st.TopErrorBound {
			t.Fatalf("%s: count %d ± %d, true %d, bound %d", c.Name, c.Count, c.Error, truth, st.TopErrorBound)
		}
	}
	keys := make([]string, 0, len(exact))
	for k := range exact {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(exact[b] - exact[a]) })
	for _, k := range keys {
		if exact[k] > st.TopErrorBound && listed[k].Name == "" {
			t.Fatalf("%s was denied %d times, over the bound %d, but is not listed", k, exact[k], st.TopErrorBound)
		}
	}
	decided := 0
	for i := range 10 {
		separated := (i == 0 || exact[keys[i-1]]-exact[keys[i]] > st.TopErrorBound) && exact[keys[i]]-exact[keys[i+1]] > st.TopErrorBound
		if !separated {
			continue
		}
		decided++
		if st.TopDeniedKeys[i].Name != keys[i] {
			t.Fatalf("position %d: %s, the true one is %s", i, st.TopDeniedKeys[i].Name, keys[i])
		}
	}
	if decided < 5 {
		t.Fatalf("only %d of the top 10 positions are decided by the guarantee: the trace is not skewed enough to test anything", decided)
	}
	if top := r.snapshot(3).TopDeniedKeys; len(top) != 3 || top[0].Name != keys[0] {
		t.Fatalf("top 3: %v", top)
	}
}

func TestStatsCountSecondsAndPolicies(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	defer r.close()
	const t0 = int64(1_800_000_000) * int64(time.Second)
	allowed := appliedEntry{&fsm.AllowCommand{NowNanos: t0, Requests: []fsm.Request{{Checks: []fsm.Check{{Key: "a", Policy: "api"}}}, {Checks: []fsm.Check{{Key: "b"}}}}},
		&fsm.Response{Results: []fsm.Result{
			{Allowed: true, Checks: []fsm.CheckResult{{Decision: algorithms.Decision{Allowed: true, Limit: 10, Remaining: 1}}}},
			{Allowed: true, Checks: []fsm.CheckResult{{Decision: algorithms.Decision{Allowed: true, Limit: 10, Remaining: 9}}}},
		}}}
	r.fold(allowed)
	r.fold(deniedEntry(t0+int64(time.Second), "x1", "x2"))
	r.fold(deniedEntry(t0+int64(time.Second), "y1"))
	st := r.snapshot(10)
	last := st.Seconds[len(st.Seconds)-2:]
	if last[0] != (contract.SecondCount{UnixSecond: t0 / 1e9, Allowed: 2}) || last[1] != (contract.SecondCount{UnixSecond: t0/1e9 + 1, Denied: 3}) {
		t.Fatalf("the last two seconds: %+v", last)
	}
	if len(st.TopDeniedPolicies) != 2 || st.TopDeniedPolicies[0] != (contract.TopCount{Name: "p-x", Count: 2}) {
		t.Fatalf("top policies %+v", st.TopDeniedPolicies)
	}
	for _, c := range []struct {
		policy, outcome string
		want            float64
	}{{"api", "allowed", 1}, {"api", "near_limit", 1}, {inlinePolicy, "allowed", 1}, {inlinePolicy, "near_limit", 0}, {"p-x", "denied", 2}} {
		if got := testutil.ToFloat64(r.policyDecisions.WithLabelValues(c.policy, c.outcome)); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.policy, c.outcome, got, c.want)
		}
	}
}

// BenchmarkRecorderFold is the recorder's work per applied entry of 100
// requests, half of them denied (what the statistics cost, off the apply
// path); compare fsm's BenchmarkApplyBatch, the apply itself.
func BenchmarkRecorderFold(b *testing.B) {
	r := newRecorder()
	defer r.close()
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	entry := deniedEntry(1_800_000_000*int64(time.Second), keys...)
	for i := range entry.resp.Results {
		if i%2 == 0 {
			entry.resp.Results[i].Allowed = true
			entry.resp.Results[i].Checks[0].Decision.Allowed = true
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		r.fold(entry)
	}
}
