package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/limitnode/limitnode/api/wire"
)

// returnShare answers POST /v1/shares/return: a caller that took a share
// (take_share on /v1/allow) gives back what it did not spend.
func (a *API) returnShare(w http.ResponseWriter, r *http.Request) {
	var body wire.ShareReturn
	if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	id, err := strconv.ParseUint(body.ID, 10, 64)
	if err != nil {
		writeError(w, invalid("id", "id must be the share's id, a decimal number, as the allow answer gave it"))
		return
	}
	if body.Unspent < 0 {
		writeError(w, invalid("unspent", "unspent must not be negative"))
		return
	}
	check, apiErr := toCheck(&wire.Check{Key: body.Key, Limit: body.Limit, Policy: body.Policy, Dimensions: body.Dimensions}, "")
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	check.Cost = 0
	if err := check.Validate(); err != nil {
		writeError(w, fromContract(err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	units, err := a.backend.Decider.ReturnShare(ctx, check, id, body.Unspent)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ShareReturned{Returned: units})
}
