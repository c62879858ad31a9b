package cluster

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/topk"
	"github.com/prometheus/client_golang/prometheus"
)

// The statistics of decisions: every node applies every allow entry, so
// each records them all. The FSM hands each applied entry over a bounded
// queue (a send that would block drops the entry and counts it), and one
// goroutine folds it into per-second counts, heavy-hitter sketches of the
// denied keys and policies, and per-policy counters: the apply path pays a
// channel send per entry, never a map update per request.

// statsQueue is how many applied entries may wait for the recorder.
const statsQueue = 4096

// statsTopSlot is the length of one slot of the top-denied window.
const statsTopSlot = 10 * time.Second

// inlinePolicy labels checks with an inline limit in the per-policy
// counters.
const inlinePolicy = "(inline)"

type appliedEntry struct {
	cmd  *fsm.AllowCommand
	resp *fsm.Response
}

// recorder keeps the statistics of the decisions this node applies.
type recorder struct {
	queue   chan appliedEntry
	stop    chan struct{} // closed by close; the queue never is, so a late record cannot panic
	done    chan struct{}
	dropped atomic.Int64

	mu             sync.Mutex
	nowNanos       int64
	seconds        [contract.StatsHistorySeconds]contract.SecondCount
	deniedKeys     *topk.Window
	deniedPolicies *topk.Window

	policyDecisions  *prometheus.CounterVec
	penalties        *prometheus.CounterVec
	entries          prometheus.Counter
	requestsPerEntry prometheus.Histogram
}

func newRecorder() *recorder {
	slots := contract.StatsTopWindowSeconds * int(time.Second) / int(statsTopSlot)
	r := &recorder{
		queue:          make(chan appliedEntry, statsQueue),
		stop:           make(chan struct{}),
		done:           make(chan struct{}),
		deniedKeys:     topk.NewWindow(contract.StatsTopCounters, slots, statsTopSlot),
		deniedPolicies: topk.NewWindow(contract.StatsTopCounters, slots, statsTopSlot),
		policyDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limitnode_policy_decisions_total",
			Help: "Checks applied by this node (every node applies every decision), by policy (\"(inline)\" for inline limits, rls/<domain> for Envoy's) and outcome: allowed, denied, shadow_denied, near_limit (allowed, leaving 20% or less).",
		}, []string{"policy", "outcome"}),
		penalties: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limitnode_penalties_total",
			Help: "Keys blocked by a penalty, as this node applied them (every node applies every decision), by policy (rls/<domain> for Envoy's).",
		}, []string{"policy"}),
		entries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "limitnode_applied_entries_total",
			Help: "Allow entries (batches of requests decided at one instant) applied by this node.",
		}),
		requestsPerEntry: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "limitnode_entry_requests",
			Help:    "Requests per applied allow entry: how much group commit batches.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
	}
	go r.run()
	return r
}

// record hands an applied entry over without blocking the apply path.
func (r *recorder) record(cmd *fsm.AllowCommand, resp *fsm.Response) {
	select {
	case r.queue <- appliedEntry{cmd, resp}:
	default:
		r.dropped.Add(1)
	}
}

// close stops the recorder. A record after it is dropped quietly (the
// queue fills and nothing reads it): a request may still be answered while
// its node shuts down.
func (r *recorder) close() {
	close(r.stop)
	<-r.done
}

func (r *recorder) run() {
	defer close(r.done)
	for {
		select {
		case e := <-r.queue:
			r.fold(e)
		case <-r.stop:
			return
		}
	}
}

// fold adds one entry's decisions.
func (r *recorder) fold(e appliedEntry) {
	r.entries.Inc()
	r.requestsPerEntry.Observe(float64(len(e.cmd.Requests)))
	r.mu.Lock()
	defer r.mu.Unlock()
	now := e.cmd.NowNanos
	r.nowNanos = max(r.nowNanos, now)
	second := now / int64(time.Second)
	slot := &r.seconds[second%contract.StatsHistorySeconds]
	if slot.UnixSecond != second {
		*slot = contract.SecondCount{UnixSecond: second}
	}
	for i := range e.cmd.Requests {
		if i >= len(e.resp.Results) {
			break
		}
		req, res := &e.cmd.Requests[i], &e.resp.Results[i]
		if res.Rejection != nil || res.Duplicate {
			continue
		}
		if res.Allowed {
			slot.Allowed++
		} else {
			slot.Denied++
		}
		if res.Penalized != "" {
			r.penalties.WithLabelValues(res.Penalized).Inc()
		}
		r.foldChecks(now, req, res)
	}
}

// foldChecks counts each check of a decided request by policy and outcome,
// and each denying check's key and policy in the top-denied sketches.
func (r *recorder) foldChecks(now int64, req *fsm.Request, res *fsm.Result) {
	for j := range res.Checks {
		c := &res.Checks[j]
		policy, key := checkNames(req, res, j)
		d := &c.Decision
		switch {
		case !d.Allowed && c.Shadow:
			r.policyDecisions.WithLabelValues(policy, "shadow_denied").Inc()
		case !d.Allowed:
			r.policyDecisions.WithLabelValues(policy, "denied").Inc()
			r.deniedKeys.Add(now, key, 1)
			r.deniedPolicies.Add(now, policy, 1)
		case res.Allowed:
			r.policyDecisions.WithLabelValues(policy, "allowed").Inc()
			if d.NearLimit() {
				r.policyDecisions.WithLabelValues(policy, "near_limit").Inc()
			}
		}
	}
}

// checkNames returns the policy and the key of a request's j-th check: an
// Envoy query's checks are named by domain and descriptor entries.
func checkNames(req *fsm.Request, res *fsm.Result, j int) (policy, key string) {
	if q := req.RLS; q != nil {
		for i, s := range res.RLS {
			if s.Limited && s.Check == j && i < len(q.Descriptors) {
				var b strings.Builder
				for k, e := range q.Descriptors[i].Entries {
					if k > 0 {
						b.WriteByte(',')
					}
					b.WriteString(e.Key + "=" + e.Value)
				}
				return fsm.RLSOwner(q.Domain), b.String()
			}
		}
		return fsm.RLSOwner(q.Domain), ""
	}
	if j >= len(req.Checks) {
		return inlinePolicy, ""
	}
	c := &req.Checks[j]
	return cmp.Or(c.Policy, inlinePolicy), cmp.Or(res.Checks[j].Key, c.Key)
}

// snapshot returns the statistics with up to top heavy hitters each.
func (r *recorder) snapshot(top int) contract.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := contract.Stats{NowNanos: r.nowNanos, Dropped: r.dropped.Load(), Seconds: make([]contract.SecondCount, contract.StatsHistorySeconds)}
	last := r.nowNanos / int64(time.Second)
	for i := range out.Seconds {
		second := last - contract.StatsHistorySeconds + 1 + int64(i)
		out.Seconds[i] = contract.SecondCount{UnixSecond: second}
		if second < 0 {
			continue
		}
		if s := r.seconds[second%contract.StatsHistorySeconds]; s.UnixSecond == second {
			out.Seconds[i] = s
		}
	}
	var bound int64
	out.TopDeniedKeys, bound = topCounts(r.deniedKeys, r.nowNanos, top)
	out.TopDeniedPolicies, _ = topCounts(r.deniedPolicies, r.nowNanos, top)
	out.TopErrorBound = bound
	return out
}

func topCounts(w *topk.Window, now int64, n int) ([]contract.TopCount, int64) {
	top, _, bound := w.Top(now, n)
	out := make([]contract.TopCount, len(top))
	for i, c := range top {
		out[i] = contract.TopCount{Name: c.Key, Count: c.Count, Error: c.Error}
	}
	return out, bound
}

func (r *recorder) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.policyDecisions, r.penalties, r.entries, r.requestsPerEntry}
}

// Stats returns the decisions of the cluster lately, with up to top heavy
// hitters each (see contract.Stats); empty with Config.NoStats. They are
// the leader's (it applies every entry, as every node does, and it alone
// knows the denials it answered without an entry: groupCommit.denyFast) together
// with what every member answered on its own, from deny leases and shares
// (answeredHere), which the leader asks each for. A follower asks the
// leader, and answers with its own when no leader answers. The shares
// outstanding are those of the state this node applied.
func (n *Node) Stats(ctx context.Context, top int) contract.Stats {
	st := n.statistics.decisions(ctx, top)
	st.Shares = n.fsm.OutstandingShares()
	return st
}

// statistics gathers the cluster's decision statistics: what this node's
// log decided (stats) and what it answered on its own (answeredHere), and,
// on the leader, what every other member answered on its own.
type statistics struct {
	route        *leaderRoute
	stats        *recorder
	answeredHere *recorder
}

// decisions is the cluster's decision statistics as the leader gathers
// them (cluster), or this node's when the leader does not answer.
func (st *statistics) decisions(ctx context.Context, top int) contract.Stats {
	if !st.route.replica.isLeader() {
		if resp, err := st.route.forward(ctx, &forwardRequest{Op: opStats, Top: top}); err == nil && resp.Stats != nil {
			return *resp.Stats
		}
	}
	return st.cluster(ctx, top)
}

// localStatsTimeout bounds the leader's wait for a member's answers given
// on its own.
const localStatsTimeout = time.Second

// cluster is what the leader's log decided, with what every member
// answered on its own (its answeredHere, asked with opLocalStats); a member
// that does not answer in time is left out.
func (st *statistics) cluster(ctx context.Context, top int) contract.Stats {
	r := st.route.replica
	// The empty part is now: the seconds end at this node's reading of
	// cluster time, not at the last decision.
	parts := []contract.Stats{st.stats.snapshot(contract.StatsTopCounters), st.answeredHere.snapshot(contract.StatsTopCounters), {NowNanos: r.clock.Estimate()}}
	future := r.raft.GetConfiguration()
	if future.Error() == nil {
		ctx, cancel := context.WithTimeout(ctx, localStatsTimeout)
		defer cancel()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, s := range future.Configuration().Servers {
			if string(s.ID) == st.route.self {
				continue
			}
			wg.Go(func() {
				resp, err := st.route.fwd.send(ctx, string(s.Address), &forwardRequest{Op: opLocalStats, Top: contract.StatsTopCounters})
				if err == nil && resp.Stats != nil {
					mu.Lock()
					parts = append(parts, *resp.Stats)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	return mergeStats(parts, top)
}

// mergeStats adds statistics of disjoint decisions: per-second counts by
// second, heavy hitters by name (each count's error adds up, as the
// bounds do), up to top of each.
func mergeStats(parts []contract.Stats, top int) contract.Stats {
	var out contract.Stats
	for _, p := range parts {
		out.NowNanos = max(out.NowNanos, p.NowNanos)
	}
	last := out.NowNanos / int64(time.Second)
	out.Seconds = make([]contract.SecondCount, contract.StatsHistorySeconds)
	for i := range out.Seconds {
		out.Seconds[i].UnixSecond = last - contract.StatsHistorySeconds + 1 + int64(i)
	}
	keys, policies := map[string]contract.TopCount{}, map[string]contract.TopCount{}
	for _, p := range parts {
		for _, sc := range p.Seconds {
			if i := sc.UnixSecond - out.Seconds[0].UnixSecond; i >= 0 && i < int64(len(out.Seconds)) && sc.UnixSecond > 0 {
				out.Seconds[i].Allowed += sc.Allowed
				out.Seconds[i].Denied += sc.Denied
			}
		}
		addTop(keys, p.TopDeniedKeys)
		addTop(policies, p.TopDeniedPolicies)
		out.TopErrorBound += p.TopErrorBound
		out.Dropped += p.Dropped
	}
	out.TopDeniedKeys, out.TopDeniedPolicies = sortedTop(keys, top), sortedTop(policies, top)
	return out
}

func addTop(into map[string]contract.TopCount, counts []contract.TopCount) {
	for _, c := range counts {
		t := into[c.Name]
		t.Name, t.Count, t.Error = c.Name, t.Count+c.Count, t.Error+c.Error
		into[c.Name] = t
	}
}

// sortedTop is the n largest counts, most first (then by name).
func sortedTop(counts map[string]contract.TopCount, n int) []contract.TopCount {
	out := make([]contract.TopCount, 0, len(counts))
	for _, c := range counts {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b contract.TopCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Name, b.Name))
	})
	return out[:min(len(out), max(n, 0))]
}

// recordAnswered records the answers this node gave reqs on its own
// (from deny leases and shares: answered), for the cluster's statistics.
func (r *recorder) recordAnswered(reqs []fsm.Request, out []fsm.Result, answered []int) {
	if len(answered) == 0 || r == nil {
		return
	}
	cmd := &fsm.AllowCommand{Requests: make([]fsm.Request, len(answered))}
	resp := &fsm.Response{Results: make([]fsm.Result, len(answered))}
	for j, i := range answered {
		cmd.Requests[j], resp.Results[j] = reqs[i], out[i]
		cmd.NowNanos = max(cmd.NowNanos, out[i].AtNanos)
	}
	r.record(cmd, resp)
}
