package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/limitnode/limitnode/fsm"
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

// acquireLease takes one of max concurrent slots of a key: 200 with the
// lease's ID, or 429 with Retry-After when all are held.
func (a *API) acquireLease(w http.ResponseWriter, r *http.Request) {
	var body leaseRequestJSON
	if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	switch {
	case body.Key == "" || len(body.Key) > MaxKeyBytes:
		writeError(w, invalid("key", "key is required and must be 1 to %d bytes", MaxKeyBytes))
		return
	case body.Max == nil || *body.Max < 1 || *body.Max > fsm.MaxLeaseMax:
		writeError(w, invalid("max", "max is required: an integer from 1 to %d", fsm.MaxLeaseMax))
		return
	case body.TTL == nil:
		writeError(w, invalid("ttl", "ttl is required: a Go duration from %s to %s", fsm.MinLeaseTTL, fsm.MaxLeaseTTL))
		return
	}
	ttl, err := time.ParseDuration(*body.TTL)
	if err != nil || ttl < fsm.MinLeaseTTL || ttl > fsm.MaxLeaseTTL {
		writeError(w, invalid("ttl", "ttl must be a Go duration from %s to %s", fsm.MinLeaseTTL, fsm.MaxLeaseTTL))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	lease, err := a.limiter.AcquireLease(ctx, body.Key, *body.Max, ttl)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	out := leaseJSON{Granted: lease.Granted, Key: lease.Key, Max: lease.Max, Active: lease.Active}
	if !lease.Granted {
		out.RetryAfterMS = ceilDiv(lease.RetryAfterNanos, int64(time.Millisecond))
		w.Header().Set("Retry-After", retryAfterHeader(out.RetryAfterMS, a.opts.Jitter))
		writeJSON(w, http.StatusTooManyRequests, out)
		return
	}
	out.ID = lease.ID
	out.ExpiresInMS = ceilDiv(lease.ExpiresAtNanos-lease.AtNanos, int64(time.Millisecond))
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
