package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/ratelimitheader"
)

// leaseTTL reads a lease's required ttl field.
func leaseTTL(s *string) (time.Duration, *apiError) {
	if s == nil {
		return 0, invalid("ttl", "ttl is required: a Go duration from %s to %s", contract.MinLeaseTTL, contract.MaxLeaseTTL)
	}
	return durationField("ttl", s)
}

// toRequest turns the body into the contract's lease request and validates
// it.
func toLeaseRequest(b *wire.LeaseRequest) (contract.LeaseRequest, *apiError) {
	if b.Max == nil {
		return contract.LeaseRequest{}, invalid("max", "max is required: an integer from 1 to %d", contract.MaxLeaseHolders)
	}
	ttl, apiErr := leaseTTL(b.TTL)
	if apiErr != nil {
		return contract.LeaseRequest{}, apiErr
	}
	maxWait, apiErr := durationField("max_wait", b.MaxWait)
	if apiErr != nil {
		return contract.LeaseRequest{}, apiErr
	}
	req := contract.LeaseRequest{Key: b.Key, Max: *b.Max, TTL: ttl, MaxWait: maxWait, MaxQueue: b.MaxQueue}
	if err := req.Validate(); err != nil {
		return contract.LeaseRequest{}, fromContract(err)
	}
	return req, nil
}

// leaseCaller is r's context carrying the caller its token names, for the
// cluster to hold a lease for it, and to let only it (or an admin) renew or
// give the lease back. Without tokens there is no caller.
func (a *API) leaseCaller(r *http.Request) context.Context {
	name := callerOf(r)
	if name == "" || a.opts.Authorizer == nil {
		return r.Context()
	}
	_, err := a.opts.Authorizer.Authorize(auth.BearerToken(r.Header.Get("Authorization")), auth.RoleAdmin)
	return contract.WithCaller(r.Context(), contract.Caller{Name: name, Admin: err == nil})
}

// acquireLease takes one of max concurrent slots of a key: 200 with the
// lease's ID, or 429 with Retry-After when all are held. With max_wait the
// request may wait in the key's queue before either answer; it leaves the
// queue if its caller goes away.
func (a *API) acquireLease(w http.ResponseWriter, r *http.Request) {
	var body wire.LeaseRequest
	if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	req, apiErr := toLeaseRequest(&body)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	extendWriteDeadline(w, req.MaxWait)
	ctx, cancel := context.WithTimeout(a.leaseCaller(r), a.opts.RequestTimeout+req.MaxWait)
	defer cancel()
	lease, err := a.backend.Leases.AcquireLease(ctx, req)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	out := leaseAnswer(lease)
	if !lease.Granted {
		w.Header().Set("Retry-After", ratelimitheader.RetryAfter(out.RetryAfterMS, a.opts.Jitter))
		writeJSON(w, http.StatusTooManyRequests, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// leaseAnswer is a lease as the API spells it: a granted one with its ID
// and time to expiry, a refused one with the time until a holder's expires.
func leaseAnswer(lease contract.Lease) wire.Lease {
	out := wire.Lease{Granted: lease.Granted, Key: lease.Key, Max: lease.Max, Active: lease.Active,
		Waiting: lease.Waiting, WaitedMS: ratelimitheader.CeilDiv(int64(lease.Waited), int64(time.Millisecond))}
	if lease.Granted {
		out.ID = lease.ID
		out.ExpiresInMS = ratelimitheader.CeilDiv(lease.ExpiresAtNanos-lease.AtNanos, int64(time.Millisecond))
	} else {
		out.RetryAfterMS = ratelimitheader.CeilDiv(int64(lease.RetryAfter), int64(time.Millisecond))
	}
	return out
}

// renewLease moves a held lease's expiry to its new ttl from now: 200 with
// the lease, or 404 when it is not held.
func (a *API) renewLease(w http.ResponseWriter, r *http.Request) {
	var body wire.RenewRequest
	if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	ttl, apiErr := leaseTTL(body.TTL)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	ctx, cancel := context.WithTimeout(a.leaseCaller(r), a.opts.RequestTimeout)
	defer cancel()
	lease, err := a.backend.Leases.RenewLease(ctx, r.PathValue("id"), ttl)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, leaseAnswer(lease))
}

func (a *API) releaseLease(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(a.leaseCaller(r), a.opts.RequestTimeout)
	defer cancel()
	if _, err := a.backend.Leases.ReleaseLease(ctx, id); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"released": id})
}

// listLeases answers GET /v1/leases?key=K: the leases held on K and the
// requests waiting for one, as this node has applied them.
func (a *API) listLeases(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if err := contract.ValidateKey(key); err != nil {
		writeError(w, fromContract(err))
		return
	}
	now, held, queued := a.backend.Leases.Leases(key)
	out := make([]wire.HeldLease, len(held))
	for i, l := range held {
		out[i] = wire.HeldLease{ID: l.ID, Max: l.Max, ExpiresInMS: ratelimitheader.CeilDiv(l.ExpiresAtNanos-now, int64(time.Millisecond))}
	}
	waiting := make([]wire.QueuedLease, len(queued))
	for i, q := range queued {
		waiting[i] = wire.QueuedLease{ID: q.ID, Max: q.Max, Position: q.Position, LeavesInMS: ratelimitheader.CeilDiv(q.DeadlineNanos-now, int64(time.Millisecond))}
	}
	writeJSON(w, http.StatusOK, wire.LeaseList{Key: key, Leases: out, Waiting: waiting})
}
