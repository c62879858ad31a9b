package httpapi

import (
	"context"
	"net/http"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
)

// returnShare answers POST /v1/shares/return: a caller that took a share
// (take_share on /v1/allow) gives back what it did not spend. The holder is
// the caller's token (callerOf), never a field of the body: a share is
// given back only by the token that took it, with the id it was given.
func (a *API) returnShare(w http.ResponseWriter, r *http.Request) {
	var body wire.ShareReturn
	if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	token, tokenErr := contract.ParseShareToken(body.ID, "id")
	if tokenErr != nil {
		writeError(w, fromContract(tokenErr))
		return
	}
	check, apiErr := toCheck(&wire.Check{Key: body.Key, Limit: body.Limit, Policy: body.Policy, Dimensions: body.Dimensions}, "")
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	ret := contract.ShareReturn{Check: check, Token: token, Unspent: body.Unspent, Holder: callerOf(r), Background: body.Background}
	if err := ret.Validate(); err != nil {
		writeError(w, fromContract(err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	units, err := a.backend.Decider.ReturnShare(ctx, ret)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ShareReturned{Returned: units})
}
