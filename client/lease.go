package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/limitnode/limitnode/api/wire"
)

// Concurrency leases: POST /v1/leases, POST /v1/leases/{id}/renew and
// DELETE /v1/leases/{id}, and WithLease, which holds a lease for the time a
// function runs.

// leaseReleaseTimeout bounds the release that ends WithLease, which runs
// even when the caller's context has ended.
const leaseReleaseTimeout = 5 * time.Second

// LeaseRequest asks for one of Max concurrent slots of Key, for at most TTL
// unless renewed or given back first.
type LeaseRequest struct {
	Key string
	// Max is how many leases of Key may be held at once (1 to 1,000,000);
	// the same Key with another Max is another group.
	Max int64
	// TTL, 1ms to 24h, is how long the lease lasts if not given back.
	TTL time.Duration
	// MaxWait, 0 to 10m, is how long the request may wait in the group's
	// FIFO queue when every slot is held; 0 answers at once. The call
	// lasts up to MaxWait: the client's http.Client Timeout is extended
	// by it for this call.
	MaxWait time.Duration
	// MaxQueue, 1 to 10,000, is required with MaxWait (and must be 0
	// without): the longest queue to join. With MaxQueue requests already
	// waiting the request is refused at once.
	MaxQueue int64
}

// toWire spells r as the API does: durations as Go duration strings
// ("30s"), max_wait and max_queue left out when zero.
func (r LeaseRequest) toWire() wire.LeaseRequest {
	ttl := r.TTL.String()
	out := wire.LeaseRequest{Key: r.Key, Max: &r.Max, TTL: &ttl, MaxQueue: r.MaxQueue}
	if r.MaxWait != 0 {
		maxWait := r.MaxWait.String()
		out.MaxWait = &maxWait
	}
	return out
}

// Lease is the answer to an acquire or a renewal.
type Lease struct {
	// ID, set when Granted, names the lease to RenewLease and ReleaseLease.
	ID  string
	Key string
	Max int64
	// Granted is false when every slot was held (and, with MaxWait, the
	// queue was full or the wait ran out).
	Granted bool
	// Active is how many leases of the group are held, this one included
	// when Granted.
	Active int64
	// Waiting is how many requests wait in the group's queue after the
	// answer. A refusal with Waited 0 after asking with MaxWait found the
	// queue full.
	Waiting int64
	// ExpiresIn, when Granted, is the time until the lease expires unless
	// renewed or given back.
	ExpiresIn time.Duration
	// RetryAfter, when not Granted, is the time until the earliest
	// holder's lease expires; it may be given back sooner.
	RetryAfter time.Duration
	// Waited is how long the request waited in the queue, or 0.
	Waited time.Duration
}

// decodeLease decodes a lease answer.
func decodeLease(a answered) (Lease, error) {
	var l wire.Lease
	if err := decodeAnswer(a, &l); err != nil {
		return Lease{}, err
	}
	return Lease{ID: l.ID, Key: l.Key, Max: l.Max, Granted: l.Granted, Active: l.Active, Waiting: l.Waiting,
		ExpiresIn:  time.Duration(l.ExpiresInMS) * time.Millisecond,
		RetryAfter: time.Duration(l.RetryAfterMS) * time.Millisecond,
		Waited:     time.Duration(l.WaitedMS) * time.Millisecond}, nil
}

// AcquireLease asks for one of req.Max concurrent slots of req.Key. A
// refusal (429) is not an error: it is a Lease with Granted false. Other
// 4xx and 5xx answers are *Error.
//
// With req.MaxWait the node holds the call while the request waits in the
// group's queue, so the call may last that long: it is made with the
// client's http.Client Timeout (when set) extended by req.MaxWait. When ctx
// ends while the request waits, the call is abandoned, which makes the node
// take the request out of the queue (or give back a slot granted
// meanwhile), and AcquireLease returns an error wrapping ctx's.
func (c *Client) AcquireLease(ctx context.Context, req LeaseRequest) (Lease, error) {
	hc := c.http
	if hc.Timeout > 0 && req.MaxWait > 0 {
		extended := *hc
		extended.Timeout += req.MaxWait
		hc = &extended
	}
	a, err := c.call(ctx, callSpec{method: http.MethodPost, path: "/v1/leases", in: req.toWire(), hc: hc,
		ok: []int{http.StatusOK, http.StatusTooManyRequests}})
	if err != nil {
		return Lease{}, err
	}
	return decodeLease(a)
}

// RenewLease moves the expiry of the held lease id to ttl from now, so that
// work running longer than planned keeps its slot. A lease that is not held
// (given back, or expired) is an *Error with StatusCode 404 and Code
// "not_found".
func (c *Client) RenewLease(ctx context.Context, id string, ttl time.Duration) (Lease, error) {
	s := ttl.String()
	in := wire.RenewRequest{TTL: &s}
	a, err := c.call(ctx, callSpec{method: http.MethodPost, path: "/v1/leases/" + url.PathEscape(id) + "/renew", in: in, ok: []int{http.StatusOK}})
	if err != nil {
		return Lease{}, err
	}
	return decodeLease(a)
}

// ReleaseLease gives the lease id back, or takes a request with that ID out
// of its queue. A lease neither held nor waiting (given back already, or
// expired) is an *Error with StatusCode 404 and Code "not_found".
func (c *Client) ReleaseLease(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/leases/"+url.PathEscape(id), nil, nil, http.StatusOK)
	return err
}

// ErrLeaseLost is wrapped by WithLease's error when the lease stopped being
// held while the work ran: a renewal or the final release found it neither
// held nor waiting (it expired, or was given back elsewhere). It is also
// the cause (context.Cause) of the work's context, cancelled when a renewal
// finds the lease gone.
var ErrLeaseLost = errors.New("limitnode: lease lost")

// LeaseRefusedError is WithLease's error when no slot was granted: every
// slot was held (and, with MaxWait, the queue was full or the wait ran
// out). Find it with errors.As:
//
//	var refused *client.LeaseRefusedError
//	if errors.As(err, &refused) {
//		// retry after refused.Lease.RetryAfter
//	}
type LeaseRefusedError struct {
	// Lease is the refusal as the node answered it.
	Lease Lease
}

// Error says which group refused, how long the request waited, and when
// to retry.
func (e *LeaseRefusedError) Error() string {
	waited := ""
	if e.Lease.Waited > 0 {
		waited = fmt.Sprintf(" after waiting %s", e.Lease.Waited)
	}
	return fmt.Sprintf("limitnode: lease on %q refused%s: %d of %d held, %d waiting; retry after %s",
		e.Lease.Key, waited, e.Lease.Active, e.Lease.Max, e.Lease.Waiting, e.Lease.RetryAfter)
}

// WithLease runs work while holding a lease of req.
//
// It acquires the lease as AcquireLease does, waiting in the queue when req
// says so; when ctx ends meanwhile, the request leaves the queue and
// WithLease returns an error wrapping ctx's. When no slot is granted it
// returns a *LeaseRefusedError, without calling work.
//
// Once granted, work runs with a context derived from ctx, and the lease is
// renewed for req.TTL every req.TTL/3; a renewal that fails for another
// reason than the lease being gone is tried again at the next tick. When a
// renewal finds the lease gone (expired, or given back elsewhere), work's
// context is cancelled with ErrLeaseLost as its cause, and WithLease
// returns an error wrapping ErrLeaseLost, joined with work's error if any.
//
// When work returns, the lease is given back, with a context that outlives
// ctx's cancellation (bounded at 5s), and WithLease returns work's error. A
// failed release is returned only when work succeeded; the lease then
// expires at most req.TTL after its last renewal anyway. A release that
// finds the lease gone wraps ErrLeaseLost too. If work panics, the renewals
// stop and the lease expires at its TTL.
func (c *Client) WithLease(ctx context.Context, req LeaseRequest, work func(ctx context.Context) error) error {
	lease, err := c.AcquireLease(ctx, req)
	if err != nil {
		return err
	}
	if !lease.Granted {
		return &LeaseRefusedError{Lease: lease}
	}
	workCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewed := make(chan error, 1) // ErrLeaseLost-wrapping error, or nil
	go func() { renewed <- c.keepLease(workCtx, cancel, lease.ID, req.TTL) }()

	workErr := work(workCtx)
	cancel(nil)
	if lostErr := <-renewed; lostErr != nil {
		return errors.Join(lostErr, workErr)
	}
	releaseCtx, cancelRelease := context.WithTimeout(context.WithoutCancel(ctx), leaseReleaseTimeout)
	defer cancelRelease()
	releaseErr := c.ReleaseLease(releaseCtx, lease.ID)
	switch {
	case workErr != nil:
		return workErr
	case isNotFound(releaseErr):
		return fmt.Errorf("%w: release of lease %s: %w", ErrLeaseLost, lease.ID, releaseErr)
	case releaseErr != nil:
		return fmt.Errorf("limitnode: release of lease %s (it expires at its TTL): %w", lease.ID, releaseErr)
	}
	return nil
}

// keepLease renews the lease id for ttl every ttl/3 until ctx ends, and
// returns nil then. When a renewal finds the lease gone it cancels ctx with
// ErrLeaseLost and returns an error wrapping ErrLeaseLost; other failures
// wait for the next tick.
func (c *Client) keepLease(ctx context.Context, cancel context.CancelCauseFunc, id string, ttl time.Duration) error {
	ticker := time.NewTicker(max(ttl/3, time.Millisecond))
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		_, err := c.RenewLease(ctx, id, ttl)
		if isNotFound(err) {
			cancel(ErrLeaseLost)
			return fmt.Errorf("%w: renewal of lease %s: %w", ErrLeaseLost, id, err)
		}
	}
}

// isNotFound reports whether err is the API's 404 not_found answer.
func isNotFound(err error) bool {
	var apiErr *Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound && apiErr.Code == "not_found"
}
