package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/ratelimitheader"
)

// nodeOf is a member as GET /v1/cluster shows it.
func nodeOf(m contract.MemberStatus) wire.Node {
	out := wire.Node{Member: wire.Member{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr}, Voter: m.Voter, Leader: m.Leader}
	if h := m.Health; h != nil {
		out.Reachable, out.AppliedIndex, out.Lag, out.DivergedAt = &h.Reachable, &h.AppliedIndex, &h.Lag, h.DivergedAt
		if h.SinceContact >= 0 {
			ms := ratelimitheader.CeilDiv(int64(h.SinceContact), int64(time.Millisecond))
			out.LastContactMS = &ms
		}
	}
	return out
}

func (a *API) clusterStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.clusterView())
}

// clusterView is this node's view of the cluster as GET /v1/cluster shows it.
func (a *API) clusterView() wire.Cluster {
	st := a.backend.Observer.Status()
	out := wire.Cluster{Self: st.SelfID, SelfRaftAddr: st.SelfRaftAddr, ClusterID: st.ClusterID, Leader: st.LeaderID, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, Nodes: []wire.Node{}}
	for _, m := range st.Members {
		out.Nodes = append(out.Nodes, nodeOf(m))
	}
	return out
}

func (a *API) join(w http.ResponseWriter, r *http.Request) {
	var body wire.JoinRequest
	if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	member := contract.Member{ID: body.ID, RaftAddr: body.RaftAddr, HTTPAddr: body.HTTPAddr}
	if err := member.Validate(); err != nil {
		writeError(w, fromContract(err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	if err := a.backend.Membership.Join(ctx, member, contract.MemberChange{Replace: body.Replace, Force: body.Force}); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, body.Member)
}

func (a *API) removeNode(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	force, bad := boolParam(r, "force")
	if bad != nil {
		writeError(w, bad)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	if err := a.backend.Membership.RemoveMember(ctx, id, contract.MemberChange{Force: force}); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": id})
}

// boolParam reads the query parameter name: absent, "true" or "false".
func boolParam(r *http.Request, name string) (bool, *apiError) {
	switch v := r.URL.Query().Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, invalid(name, "%s must be true or false, not %q", name, v)
	}
}

// checkConsistency answers POST /v1/cluster/consistency: the leader appends
// a checkpoint and says which members' state agrees with its own there.
func (a *API) checkConsistency(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	report, err := a.backend.Membership.CheckConsistency(ctx)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	out := wire.Consistency{Index: report.Index}
	for _, m := range report.Members {
		out.Members = append(out.Members, wire.MemberConsistency{ID: m.ID, Agrees: m.Agrees})
	}
	writeJSON(w, http.StatusOK, out)
}

// transferLeadership answers POST /v1/cluster/transfer-leadership with the
// body {"to": "n2"} (or {} or none, for any other voter).
func (a *API) transferLeadership(w http.ResponseWriter, r *http.Request) {
	var body wire.TransferRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
			writeError(w, err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	if err := a.backend.Membership.TransferLeadership(ctx, body.To); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a.clusterView())
}
