package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/ratelimitheader"
)

// blockToJSON is a block as the API shows it, its time left counted from
// cluster time now.
func blockToJSON(b contract.Block, nowNanos int64) wire.Block {
	ms := int64(time.Millisecond)
	return wire.Block{Key: b.Key, Reason: b.Reason, Penalty: b.Penalty, SinceUnixMS: b.SinceNanos / ms, UntilUnixMS: ratelimitheader.CeilDiv(b.UntilNanos, ms),
		EndsInMS: ratelimitheader.CeilDiv(b.UntilNanos-nowNanos, ms)}
}

// putBlock answers PUT /v1/blocks/{key} {"ttl", "reason"}: the key is
// blocked through the log, replacing a block it had.
func (a *API) putBlock(w http.ResponseWriter, r *http.Request) {
	var body wire.BlockRequest
	if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	if body.TTL == nil {
		writeError(w, invalid("ttl", "ttl is required: a Go duration from %s to %s", contract.MinBlockTTL, contract.MaxBlockTTL))
		return
	}
	ttl, apiErr := durationField("ttl", body.TTL)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	req := contract.BlockRequest{Key: r.PathValue("key"), Reason: body.Reason, TTL: ttl}
	if err := req.Validate(); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	b, err := a.backend.Blocks.PutBlock(ctx, req)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, blockToJSON(b, b.SinceNanos))
}

// deleteBlock answers DELETE /v1/blocks/{key}: the block is lifted through
// the log, and the answer is the block as it was, ending now; 404 when the
// key is not blocked.
func (a *API) deleteBlock(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := contract.ValidateKey(key); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	b, err := a.backend.Blocks.DeleteBlock(ctx, key)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, blockToJSON(b, b.UntilNanos))
}

// listBlocks answers GET /v1/blocks?limit=N&after=K with a page of blocked
// keys and, when more follow, "next", the key to pass as after.
func (a *API) listBlocks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, apiErr := pageLimit(q, contract.DefaultBlockPage, contract.ValidateBlockPage)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	now, page, next, err := a.backend.Blocks.Blocks(r.Context(), q.Get("after"), limit)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	out := wire.BlockPage{Blocks: make([]wire.Block, len(page)), Next: next}
	for i, b := range page {
		out.Blocks[i] = blockToJSON(b, now)
	}
	writeJSON(w, http.StatusOK, out)
}

// blockedAnswer is what an allow answer says of the block that denied it,
// its time left counted from the decision's time.
func blockedAnswer(b *contract.BlockedCheck, atNanos int64) *wire.Blocked {
	if b == nil {
		return nil
	}
	return &wire.Blocked{Key: b.Key, Reason: b.Reason, Penalty: b.Penalty, EndsInMS: ratelimitheader.CeilDiv(b.UntilNanos-atNanos, int64(time.Millisecond))}
}
