package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/ratelimitheader"
)

// keyToJSON is a key's state as the API shows it.
func keyToJSON(k contract.KeyState) wire.KeyState {
	out := wire.KeyState{Key: k.Key, Limits: make([]wire.KeyLimit, len(k.Limits))}
	for i, l := range k.Limits {
		out.Limits[i] = wire.KeyLimit{Owner: l.Owner, Limit: *limitToJSON(l.Limit), Remaining: l.Decision.Remaining,
			ResetAfterMS: ratelimitheader.CeilDiv(int64(l.Decision.ResetAfter), int64(time.Millisecond))}
	}
	return out
}

// getKey answers GET /v1/keys/{key}: the key's state under each limit,
// consuming nothing; 404 when it holds none.
func (a *API) getKey(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := contract.ValidateKey(key); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	ks, ok, err := a.backend.Keys.Key(r.Context(), key)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	if !ok {
		writeError(w, notFound("key", "the key %q holds no state", key))
		return
	}
	writeJSON(w, http.StatusOK, keyToJSON(ks))
}

// listKeys answers GET /v1/keys?prefix=P&limit=N&after=K with a page of live
// keys and, when more follow, "next", the key to pass as after.
func (a *API) listKeys(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, apiErr := pageLimit(q, contract.DefaultKeyPage, contract.ValidateKeyPage)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	page, next, err := a.backend.Keys.Keys(r.Context(), q.Get("prefix"), q.Get("after"), limit)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	out := wire.KeyPage{Keys: make([]wire.KeyState, len(page)), Next: next}
	for i, k := range page {
		out.Keys[i] = keyToJSON(k)
	}
	writeJSON(w, http.StatusOK, out)
}

// resetKey answers DELETE /v1/keys/{key}: the key's state under every limit
// is deleted through the log; 404 when it holds none.
func (a *API) resetKey(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	n, err := a.backend.Keys.ResetKey(ctx, key)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.KeyReset{Reset: key, Limits: n})
}
