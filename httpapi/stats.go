package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/buildinfo"
)

// The statistics of GET /v1/stats and the status page (GET /): this node's
// view of the cluster, and what it has seen decided lately (every node
// applies every decision, so any node can tell).

// Bounds of GET /v1/stats: top entries of each list (default DefaultStatsTop,
// at most MaxStatsTop, `top`), and the shadow policies shown.
const (
	DefaultStatsTop   = 10
	MaxStatsTop       = 100
	maxShadowPolicies = 100
)

// statsTop reads the `top` parameter.
func statsTop(r *http.Request) (int, *apiError) {
	top := DefaultStatsTop
	if s := r.URL.Query().Get("top"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxStatsTop {
			return 0, invalid("top", "top must be an integer from 1 to %d", MaxStatsTop)
		}
		top = n
	}
	return top, nil
}

// statsOf gathers what GET /v1/stats and the status page show.
func (a *API) statsOf(r *http.Request, top int) wire.Stats {
	st := a.backend.Observer.Stats(r.Context(), top)
	out := wire.Stats{Version: buildinfo.Version(), Cluster: a.clusterView(), NowMS: st.NowNanos / int64(time.Millisecond),
		Seconds: make([]wire.Second, len(st.Seconds)), TopKeys: tops(st.TopDeniedKeys), TopPolicies: tops(st.TopDeniedPolicies),
		ErrorBound: st.TopErrorBound, Dropped: st.Dropped, Policies: []wire.ShadowPolicy{}, Shares: []wire.Shares{}}
	for _, s := range st.Shares {
		out.Shares = append(out.Shares, wire.Shares{Policy: s.Policy, Shares: s.Shares, Units: s.Units})
	}
	for i, s := range st.Seconds {
		out.Seconds[i] = wire.Second{UnixSecond: s.UnixSecond, Allowed: s.Allowed, Denied: s.Denied}
	}
	// The shadow policies, when the policies can be read: statistics are
	// this node's view, and stay available without a leader.
	page, _, _ := a.backend.Policies.Policies(r.Context(), "", MaxPolicyPage, contract.MaxOverrides)
	for _, p := range page {
		if (p.Shadow || p.ShadowDenied > 0) && len(out.Policies) < maxShadowPolicies {
			out.Policies = append(out.Policies, wire.ShadowPolicy{Name: p.Name, Shadow: p.Shadow, ShadowDenied: p.ShadowDenied})
		}
	}
	blocks := a.backend.Blocks.BlockSummary(top)
	out.Blocked = wire.BlockedKeys{Count: blocks.Blocked, ByPenalty: blocks.ByPenalty, Latest: []wire.Block{}}
	for _, b := range blocks.Latest {
		out.Blocked.Latest = append(out.Blocked.Latest, blockToJSON(b, blocks.AtNanos))
	}
	out.RecentChanges = []wire.AuditEntry{}
	for _, e := range a.backend.Audit.RecentAudit(recentChanges) {
		out.RecentChanges = append(out.RecentChanges, auditToJSON(e))
	}
	return out
}

func tops(in []contract.TopCount) []wire.Top {
	out := make([]wire.Top, len(in))
	for i, c := range in {
		out[i] = wire.Top{Name: c.Name, Count: c.Count, Error: c.Error}
	}
	return out
}

func (a *API) stats(w http.ResponseWriter, r *http.Request) {
	top, err := statsTop(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.statsOf(r, top))
}
