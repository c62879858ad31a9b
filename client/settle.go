package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/limitnode/limitnode/api/wire"
)

// Charge up front, then settle: a call whose cost is known only once it is
// done (the tokens a model streams, the rows an export writes) is charged
// the most it may cost up front, does its work, and settles with what it
// used. What it did not use is given back, what it used beyond is charged
// (up to the policy's max_debt beyond empty), and a settlement never
// settled stays charged in full when its TTL ends.

// Settlement is the answer of a settlement (wire.Settlement, its
// milliseconds a duration): the cost charged up front and the cost settled,
// what was given back (Refunded) or charged beyond the up-front charge
// (Charged; what the debt bound left out, Forgiven), each the least over the
// request's checks, and, when a check is left in debt, how long until it
// admits again (RetryAfter). Duplicate: the same settlement was made
// before, and this is its answer. It spells itself in JSON as the API does.
type Settlement struct {
	SettlementID                string
	Upfront, Cost               int64
	Refunded, Charged, Forgiven int64
	RetryAfter                  time.Duration
	Duplicate                   bool
}

func settlementOf(w wire.Settlement) Settlement {
	return Settlement{SettlementID: w.SettlementID, Upfront: w.Upfront, Cost: w.Cost, Refunded: w.Refunded, Charged: w.Charged,
		Forgiven: w.Forgiven, RetryAfter: millis(w.RetryAfterMS), Duplicate: w.Duplicate}
}

// MarshalJSON spells s as the API does (wire.Settlement).
func (s Settlement) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire.Settlement{SettlementID: s.SettlementID, Upfront: s.Upfront, Cost: s.Cost, Refunded: s.Refunded,
		Charged: s.Charged, Forgiven: s.Forgiven, RetryAfterMS: inMillis(s.RetryAfter), Duplicate: s.Duplicate})
}

// Settle settles the open settlement id (a Decision's SettlementID) with
// cost, what the request used. Settling again with the same cost answers
// the first settlement (Duplicate) and changes nothing; another cost is a
// 409 *Error; an unknown or ended settlement a 404 *Error.
func (c *Client) Settle(ctx context.Context, id string, cost int64) (Settlement, error) {
	var out wire.Settlement
	_, err := c.do(ctx, http.MethodPost, "/v1/settle", wire.SettleRequest{SettlementID: id, Cost: &cost}, &out, http.StatusOK)
	return settlementOf(out), err
}

// OpenSettlement is an admission charged up front and not settled yet: its
// decision, and what settles it.
type OpenSettlement struct {
	Decision
	c *Client
}

// StartSettlement asks for req charged up front, to settle within ttl
// (req's SettleTTL): req's cost, on every check, is the most the work may
// cost. An admission answers an OpenSettlement to settle when the work is
// done; a denial answers one whose Decision says so, with nothing to
// settle.
func (c *Client) StartSettlement(ctx context.Context, req AllowRequest, ttl time.Duration) (*OpenSettlement, error) {
	if err := req.validatePeeks(); err != nil {
		return nil, err
	}
	req.SettleTTL = ttl
	d, err := c.allowOne(ctx, req)
	if err != nil {
		return nil, err
	}
	return &OpenSettlement{Decision: d, c: c}, nil
}

// settleRetryEvery is how long Settle waits between attempts while the
// cluster answers 503.
const settleRetryEvery = 100 * time.Millisecond

// Settle settles the open settlement with used, what the work cost. While the
// cluster cannot say whether it settled (503: no leader, or an unknown
// outcome), it asks again with the same cost until ctx ends: a settlement
// made twice is answered once and charged once. A denied request has
// nothing to settle: it answers the zero Settlement.
func (r *OpenSettlement) Settle(ctx context.Context, used int64) (Settlement, error) {
	if r.SettlementID == "" {
		return Settlement{}, nil
	}
	for {
		s, err := r.c.Settle(ctx, r.SettlementID, used)
		var apiErr *Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
			return s, err
		}
		select {
		case <-ctx.Done():
			return Settlement{}, errors.Join(err, ctx.Err())
		case <-time.After(settleRetryEvery):
		}
	}
}

// Settle settles the open settlement of d, one of the Guard's decisions,
// with used (as OpenSettlement.Settle does, retrying while the cluster
// answers 503). A decision the FailurePolicy made holds none: the zero
// Settlement.
func (g *Guard) Settle(ctx context.Context, d GuardDecision, used int64) (Settlement, error) {
	return (&OpenSettlement{Decision: d.Decision, c: g.client}).Settle(ctx, used)
}
