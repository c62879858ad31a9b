package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/ratelimitheader"
)

// settle answers POST /v1/settle {"settlement_id", "cost"}: the reservation
// is settled through the log with what the request used. The reservation
// is the caller's (a token's own, as its request IDs are). The answer's
// X-Limitnode-Decided-At is the cluster time the settlement took effect (a
// retry's, the first's).
func (a *API) settle(w http.ResponseWriter, r *http.Request) {
	var body wire.SettleRequest
	if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	if body.Cost == nil {
		writeError(w, invalid("cost", "cost is required: what the request used, from 0"))
		return
	}
	req := contract.SettleRequest{ID: body.SettlementID, Cost: *body.Cost, Scope: callerOf(r)}
	if err := req.Validate(); err != nil {
		writeError(w, fromContract(err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	s, err := a.backend.Settler.Settle(ctx, req)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	w.Header().Set("X-Limitnode-Decided-At", strconv.FormatInt(s.AtNanos, 10))
	writeJSON(w, http.StatusOK, wire.Settlement{SettlementID: s.ID, Upfront: s.Upfront, Cost: s.Cost, Refunded: s.Refunded, Charged: s.Charged,
		Forgiven: s.Forgiven, RetryAfterMS: ratelimitheader.CeilDiv(int64(s.RetryAfter), int64(time.Millisecond)), Duplicate: s.Duplicate})
}
