package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/ratelimitheader"
)

type leaseRequestJSON struct {
	Key string  `json:"key"`
	Max *int64  `json:"max"`
	TTL *string `json:"ttl"`
}

type leaseJSON struct {
	Granted      bool   `json:"granted"`
	ID           string `json:"id,omitempty"`
	Key          string `json:"key"`
	Max          int64  `json:"max"`
	Active       int64  `json:"active"`
	ExpiresInMS  int64  `json:"expires_in_ms,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms"`
}

// toRequest turns the body into the contract's lease request and validates
// it.
func (b *leaseRequestJSON) toRequest() (contract.LeaseRequest, *apiError) {
	switch {
	case b.Max == nil:
		return contract.LeaseRequest{}, invalid("max", "max is required: an integer from 1 to %d", contract.MaxLeaseHolders)
	case b.TTL == nil:
		return contract.LeaseRequest{}, invalid("ttl", "ttl is required: a Go duration from %s to %s", contract.MinLeaseTTL, contract.MaxLeaseTTL)
	}
	ttl, err := time.ParseDuration(*b.TTL)
	if err != nil {
		return contract.LeaseRequest{}, invalid("ttl", "ttl %q is not a Go duration such as \"30s\" or \"2m\"", *b.TTL)
	}
	req := contract.LeaseRequest{Key: b.Key, Max: *b.Max, TTL: ttl}
	if err := req.Validate(); err != nil {
		return contract.LeaseRequest{}, fromContract(err)
	}
	return req, nil
}

// acquireLease takes one of max concurrent slots of a key: 200 with the
// lease's ID, or 429 with Retry-After when all are held.
func (a *API) acquireLease(w http.ResponseWriter, r *http.Request) {
	var body leaseRequestJSON
	if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	req, apiErr := body.toRequest()
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	lease, err := a.limiter.AcquireLease(ctx, req)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	out := leaseJSON{Granted: lease.Granted, Key: lease.Key, Max: lease.Max, Active: lease.Active}
	if !lease.Granted {
		out.RetryAfterMS = ratelimitheader.CeilDiv(lease.RetryAfterNanos, int64(time.Millisecond))
		w.Header().Set("Retry-After", ratelimitheader.RetryAfter(out.RetryAfterMS, a.opts.Jitter))
		writeJSON(w, http.StatusTooManyRequests, out)
		return
	}
	out.ID = lease.ID
	out.ExpiresInMS = ratelimitheader.CeilDiv(lease.ExpiresAtNanos-lease.AtNanos, int64(time.Millisecond))
	writeJSON(w, http.StatusOK, out)
}

func (a *API) releaseLease(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	if err := a.limiter.ReleaseLease(ctx, id); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"released": id})
}

// heldLeaseJSON is one held lease in GET /v1/leases.
type heldLeaseJSON struct {
	ID          string `json:"id"`
	Max         int64  `json:"max"`
	ExpiresInMS int64  `json:"expires_in_ms"`
}

// listLeases answers GET /v1/leases?key=K: the leases held on K, as this
// node has applied them.
func (a *API) listLeases(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if err := contract.ValidateKey(key); err != nil {
		writeError(w, fromContract(err))
		return
	}
	now, held := a.limiter.Leases(key)
	out := make([]heldLeaseJSON, len(held))
	for i, l := range held {
		out[i] = heldLeaseJSON{ID: l.ID, Max: l.Max, ExpiresInMS: ratelimitheader.CeilDiv(l.ExpiresAtNanos-now, int64(time.Millisecond))}
	}
	writeJSON(w, http.StatusOK, map[string]any{"key": key, "leases": out})
}
