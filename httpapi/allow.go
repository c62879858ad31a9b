package httpapi

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/ratelimitheader"
)

func (a *API) allow(w http.ResponseWriter, r *http.Request) {
	var body wire.AllowRequest
	if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	req, apiErr := toRequest(&body)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	decision, ok := a.decide(w, r, req.Request, req.contractError)
	if !ok {
		return
	}
	if req.hold {
		holdReservation(r.Context(), w, &decision)
	}
	a.writeDecision(w, req.Request, decision, http.StatusTooManyRequests, false)
}

// MaxHoldWait bounds the wait a request with hold is held for: the node
// keeps the request open for the reservation's wait after deciding, so its
// max_wait counts as at most this, and the answer comes within the request
// timeout plus this, as the server's write timeout and a client's own (the
// Go client's is 10 s) expect. A caller that may wait longer asks without
// hold and waits out wait_ms itself.
const MaxHoldWait = 5 * time.Second

// holdReservation waits out an admitted reservation before the answer is
// written (hold: true), and records that it did: the caller may then go on
// at once. A caller that goes away ends the wait; its reservation stays
// consumed, as it would had it waited itself.
func holdReservation(ctx context.Context, w http.ResponseWriter, d *contract.Decision) {
	wait := waitOf(*d)
	if !d.Allowed || wait <= 0 {
		return
	}
	extendWriteDeadline(w, time.Duration(wait))
	timer := time.NewTimer(time.Duration(wait))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	// The answer goes out after the wait: what it says of the state counts
	// from then.
	d.Held = time.Duration(wait)
	for i := range d.Checks {
		c := &d.Checks[i]
		c.Wait = 0
		c.ResetAfter = max(c.ResetAfter-time.Duration(wait), 0)
		c.RefillAfter = max(c.RefillAfter-time.Duration(wait), 0)
	}
}

// waitOf is a decision's wait: the longest of its checks' reservations.
func waitOf(d contract.Decision) int64 {
	var wait int64
	for _, c := range d.Checks {
		wait = max(wait, int64(c.Wait))
	}
	return wait
}

// decide asks the cluster for req's decision on behalf of r's caller. When
// it cannot be had, it answers w (a refusal of the request through
// refused, which names its fields as the caller spelled them) and reports
// false.
func (a *API) decide(w http.ResponseWriter, r *http.Request, req contract.Request, refused func(*contract.Error) *apiError) (contract.Decision, bool) {
	req.Scope = callerOf(r)
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	decision, err := a.backend.Decider.Allow(ctx, req)
	if rej := contract.As(err); rej != nil {
		writeError(w, refused(rej))
		return contract.Decision{}, false
	}
	if err != nil {
		a.writeClusterError(w, r, err)
		return contract.Decision{}, false
	}
	return decision, true
}

// writeDecision answers a decision: 200, or denyStatus with Retry-After,
// both with the rate-limit headers of the check that leads it. An answer
// forProxy, which a proxy may copy to its client, says nothing internal:
// no keys (they may hold user or tenant IDs), no leader, no cluster time.
func (a *API) writeDecision(w http.ResponseWriter, req contract.Request, decision contract.Decision, denyStatus int, forProxy bool) {
	a.metrics.decided(decision.Allowed)
	resp, headline := answer(req, decision)
	if forProxy {
		resp.Checks = nil
		if resp.Blocked != nil {
			resp.Blocked.Key = ""
		}
	}
	policy := req.Checks[headline].Policy
	if policy == "" {
		policy = "default"
	}
	check := decision.Checks[headline]
	for _, f := range ratelimitheader.Fields(policy, check.Decision, check.Rate, int64(check.Period)) {
		w.Header().Set(f.Name, f.Value)
	}
	if !forProxy {
		// The cluster time of the decision (Unix ns), for clients that
		// check or debug the order of decisions.
		w.Header().Set("X-Limitnode-Decided-At", strconv.FormatInt(decision.AtNanos, 10))
		if decision.Leased {
			// Answered here from a deny lease: no leader decided it now.
			w.Header().Set("X-Limitnode-Leased", "true")
		}
		if decision.Shared {
			// Admitted here from a share this node holds.
			w.Header().Set("X-Limitnode-Shared", "true")
		}
		setLeaderHeader(w.Header(), decision.Leader)
	}
	status := http.StatusOK
	if !decision.Allowed {
		status = denyStatus
		w.Header().Set("Retry-After", ratelimitheader.RetryAfter(resp.RetryAfterMS, a.opts.Jitter))
		if h := deniedByHeader(decision); h != "" {
			w.Header().Set(ratelimitheader.DeniedByName, h)
		}
	}
	writeJSON(w, status, resp)
}

// deniedByHeader is the Limitnode-Denied-By header of a denial, or "" when
// it says nothing of what denied it.
func deniedByHeader(d contract.Decision) string {
	by := d.DeniedBy
	if by == nil {
		return ""
	}
	denial := ratelimitheader.Denial{Policy: cmp.Or(by.Policy, "default"), Index: by.Check, Param: "check", Version: by.PolicyVersion, Cause: by.Cause, Limit: by.Limit}
	if d.Blocked != nil {
		denial.Reason = d.Blocked.Reason
	}
	return ratelimitheader.DeniedBy(denial)
}

// answer builds the response body of a decision and says which check leads
// it (its numbers are the top-level ones, and the headers follow it).
func answer(req contract.Request, d contract.Decision) (wire.AllowResponse, int) {
	headline := headlineIndex(d)
	h := d.Checks[headline]
	resp := wire.AllowResponse{
		Duplicate:    d.Duplicate,
		Allowed:      d.Allowed,
		Limit:        h.Limit,
		Remaining:    h.Remaining,
		ResetAfterMS: ratelimitheader.CeilDiv(int64(h.ResetAfter), int64(time.Millisecond)),
	}
	if !d.Allowed {
		resp.RetryAfterMS = ratelimitheader.CeilDiv(int64(h.RetryAfter), int64(time.Millisecond))
	}
	resp.WaitMS = ratelimitheader.CeilDiv(waitOf(d), int64(time.Millisecond))
	if s := d.Share; s != nil {
		resp.Share = &wire.Share{ID: s.Token.String(), Units: s.Units, SpendForMS: int64(s.SpendFor) / int64(time.Millisecond), Remaining: s.Remaining}
	}
	resp.HeldMS = ratelimitheader.CeilDiv(int64(d.Held), int64(time.Millisecond))
	resp.Blocked = blockedAnswer(d.Blocked, d.AtNanos)
	resp.SettlementID = d.SettlementID
	if by := d.DeniedBy; by != nil {
		resp.DeniedBy = &wire.DeniedBy{Check: by.Check, Policy: by.Policy, PolicyVersion: by.PolicyVersion, Limit: *limitToJSON(by.Limit), Cause: by.Cause}
	}
	detailed := len(req.Checks) > 1
	for _, c := range d.Checks {
		detailed = detailed || c.Shadow || c.Key != ""
	}
	if detailed {
		for i, c := range d.Checks {
			key := c.Key
			if key == "" {
				key = req.Checks[i].Key
			}
			resp.Checks = append(resp.Checks, wire.CheckResponse{
				Key: key, Policy: req.Checks[i].Policy, Shadow: c.Shadow,
				Allowed: c.Allowed, Limit: c.Limit, Remaining: c.Remaining,
				ResetAfterMS: ratelimitheader.CeilDiv(int64(c.ResetAfter), int64(time.Millisecond)),
				RetryAfterMS: ratelimitheader.CeilDiv(int64(c.RetryAfter), int64(time.Millisecond)),
			})
		}
	}
	return resp, headline
}

// headlineIndex picks the check whose numbers the response leads with and
// whose headers it sends: among checks that can deny (not in shadow mode,
// unless all are), a denying one that frees up last; if none denies, the
// one with the least remaining.
func headlineIndex(d contract.Decision) int {
	best := -1
	for i, c := range d.Checks {
		if c.Shadow {
			continue
		}
		if best < 0 || moreRestrictive(c, d.Checks[best]) {
			best = i
		}
	}
	if best >= 0 {
		return best
	}
	best = 0
	for i, c := range d.Checks {
		if moreRestrictive(c, d.Checks[best]) {
			best = i
		}
	}
	return best
}

func moreRestrictive(c, than contract.CheckDecision) bool {
	switch {
	case !c.Allowed && than.Allowed:
		return true
	case !c.Allowed && !than.Allowed:
		return c.RetryAfter > than.RetryAfter
	case c.Allowed && than.Allowed:
		return c.Remaining < than.Remaining
	}
	return false
}

func (a *API) allowBatch(w http.ResponseWriter, r *http.Request) {
	var body wire.BatchRequest
	if err := decodeJSON(w, r, MaxBatchBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	checks := 0
	for _, r := range body.Requests {
		checks += max(len(r.Checks), 1)
	}
	if err := contract.ValidateBatchSize(len(body.Requests), checks); err != nil {
		writeError(w, fromContract(err))
		return
	}
	items := make([]wire.BatchItem, len(body.Requests))
	decoded := make([]allowRequest, 0, len(body.Requests))
	reqs := make([]contract.Request, 0, len(body.Requests))
	index := make([]int, 0, len(body.Requests))
	for i := range body.Requests {
		req, err := toRequest(&body.Requests[i])
		if err != nil {
			items[i] = batchError(i, err)
			continue
		}
		req.Scope = callerOf(r)
		decoded = append(decoded, req)
		reqs = append(reqs, req.Request)
		index = append(index, i)
	}
	if len(reqs) > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
		defer cancel()
		results, err := a.backend.Decider.AllowBatch(ctx, reqs)
		if err != nil {
			a.writeClusterError(w, r, err)
			return
		}
		var leader string
		for j, res := range results {
			i := index[j]
			if res.Err != nil {
				apiErr := a.clusterError(r, res.Err)
				if rej := contract.As(res.Err); rej != nil {
					apiErr = decoded[j].contractError(rej)
				}
				items[i] = batchError(i, apiErr)
				continue
			}
			a.metrics.decided(res.Decision.Allowed)
			leader = res.Decision.Leader // one entry, one leader
			resp, _ := answer(reqs[j], res.Decision)
			status := http.StatusOK
			if !res.Decision.Allowed {
				status = http.StatusTooManyRequests
			}
			items[i] = wire.BatchItem{Status: status, AllowResponse: &resp}
		}
		setLeaderHeader(w.Header(), leader)
	}
	writeJSON(w, http.StatusOK, map[string][]wire.BatchItem{"responses": items})
}

// batchError is the answer of the batch's i-th request when it failed on
// its own: its fields are named under "requests[i]".
func batchError(i int, err *apiError) wire.BatchItem {
	e := err.body()
	e.Field = (&contract.Error{Field: e.Field}).Within("requests[" + strconv.Itoa(i) + "]").Field
	return wire.BatchItem{Status: err.status, Error: &e}
}

// setLeaderHeader names the leader that decided (API.md's optional
// X-Limitnode-Leader), so an operator can tell which node's entry it was.
func setLeaderHeader(h http.Header, leader string) {
	if leader != "" {
		h.Set("X-Limitnode-Leader", leader)
	}
}
