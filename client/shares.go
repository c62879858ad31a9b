package client

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/internal/holdtime"
	"github.com/limitnode/limitnode/internal/sharetable"
)

// Local shares in the client (Options.LocalShares): the client takes a
// share of a hot key's budget from the cluster, riding on a request it
// sends anyway (take_share), and answers the key's next requests from it
// in process, asking for the next share in the background before it runs
// out. The cluster charges a share as if every unit were spent at its end,
// so what every client and node admit together never exceeds the limit;
// the client stops spending a share spend_for_ms after it sent the request
// that brought it, on its monotonic clock. Close gives back what is left.
// Which keys, how much and when is internal/sharetable's, shared with the
// cluster's nodes.

// defaultShareTTL is the TTL a client asks its shares for when the check's
// limit does not say (a policy's own local_shares bound it on the cluster).
const defaultShareTTL = 500 * time.Millisecond

// mostUnits bounds what the client asks for at once; the cluster grants
// at most half of what a key has left, within the policy's max_units.
const mostUnits = 1_000_000_000

// clientShares is a client's shares: by the request's key, named to the
// cluster by the check (for giving back), answering from the decision that
// brought the share.
type clientShares = sharetable.Table[wire.ShareReturn, Decision]

// shareable reports whether req may be answered from a share, with its
// key's name and the shares' TTL: one check (a policy's, or an inline limit
// with LocalShares), no request ID, max_wait, hold or settle.
func shareable(req *AllowRequest) (name string, ttl time.Duration, ok bool) {
	if len(req.Checks) > 0 || req.RequestID != "" || req.MaxWait != 0 || req.Hold || req.SettleTTL != 0 {
		return "", 0, false
	}
	ttl = defaultShareTTL
	switch {
	case req.Policy != "" && req.Limit == nil:
	case req.Limit != nil && req.Limit.LocalShares != nil:
		if d := req.Limit.LocalShares.TTL; d > 0 {
			ttl = d
		}
	default:
		return "", 0, false
	}
	// Each string is written after its length, so that no key or
	// dimension, whatever bytes it holds, names another key's share.
	var b strings.Builder
	writeCounted(&b, req.Policy)
	writeCounted(&b, req.Key)
	if l := req.Limit; l != nil {
		b.WriteString(l.Algorithm + "/" + strconv.FormatInt(l.Rate, 10) + "/" + l.Period.String() + "/" + strconv.FormatInt(l.Burst, 10))
	}
	for _, k := range slices.Sorted(maps.Keys(req.Dimensions)) {
		b.WriteString("\x00")
		writeCounted(&b, k)
		writeCounted(&b, req.Dimensions[k])
	}
	return b.String(), ttl, true
}

// writeCounted writes s to b after its length and a colon.
func writeCounted(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// allowShared decides req from the client's shares when it can (answered),
// or sends it, asking for a share when the key is hot.
func (c *Client) allowShared(ctx context.Context, req AllowRequest) (d Decision, answered bool, err error) {
	name, ttl, ok := shareable(&req)
	if !ok {
		return Decision{}, false, nil
	}
	cost := max(req.Cost, 1)
	if req.Peek {
		cost = 0
	}
	body := req.toWire()
	named := wire.ShareReturn{Key: body.Key, Limit: body.Limit, Policy: body.Policy, Dimensions: body.Dimensions}
	taken := c.shares.Take(ctx, sharetable.Key[wire.ShareReturn]{Name: name, ID: named, TTL: ttl, Most: mostUnits, Cost: cost})
	if taken.Renew > 0 {
		renew := body
		zero := int64(0)
		renew.Cost = &zero
		go c.askShare(name, renew, taken.Renew, ttl)
	}
	if taken.Answered {
		return sharedDecision(taken.Template, taken.Since, taken.Left), true, nil
	}
	if taken.Ask == 0 {
		return Decision{}, false, nil
	}
	sentAt := time.Now()
	body.TakeShare = shareAsk(taken.Ask, ttl)
	d, err = c.allowWire(ctx, body)
	c.settleShare(name, sentAt, d, err)
	d.Share = nil
	return d, true, err
}

func shareAsk(units int64, ttl time.Duration) *wire.ShareAsk {
	s := ttl.String()
	return &wire.ShareAsk{Units: &units, TTL: &s}
}

// askShare asks for key name's next share in the background, with a
// request of cost 0.
func (c *Client) askShare(name string, body wire.AllowRequest, units int64, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body.TakeShare = shareAsk(units, ttl)
	sentAt := time.Now()
	d, err := c.allowWire(ctx, body)
	c.settleShare(name, sentAt, d, err)
}

// settleShare takes the answer to a share ask sent at sentAt.
func (c *Client) settleShare(name string, sentAt time.Time, d Decision, err error) {
	s := d.Share
	if err != nil || s == nil {
		c.shares.Settle(name, sentAt, nil, Decision{})
		return
	}
	template := d
	template.Share, template.Checks, template.Remaining = nil, nil, s.Remaining
	c.shares.Settle(name, sentAt, &sharetable.Grant{Token: s.ID, Units: s.Units, SpendFor: s.SpendFor}, template)
}

// sharedDecision is the admission a share gives since after its grant's
// request was sent: the grant's decision, what is left counted as what the
// key had left for others when the share was granted plus what this client
// holds (left), its reset shorter by since.
func sharedDecision(grant Decision, since time.Duration, left int64) Decision {
	d := grant
	d.Allowed, d.ExactRetryAfter, d.Wait, d.Held, d.StatusCode = true, 0, 0, 0, http.StatusOK
	d.Remaining = min(d.Remaining+left, d.Limit)
	d.ResetAfter = time.Duration(holdtime.Shorten(int64(d.ResetAfter), since)).Truncate(time.Millisecond)
	d.Leader, d.Shared = "", true
	d.setHeadersFromFields()
	return d
}

// newClientShares is the table of a client with local shares: what it
// retires unspent (a newer share of its key arrived, or it nears its end)
// it gives back in the background.
func (c *Client) newClientShares() *clientShares {
	t := sharetable.New[wire.ShareReturn, Decision](time.Now)
	t.GiveBack = func(returns []sharetable.Return[wire.ShareReturn]) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.giveBack(ctx, returns, true) // a share not given back is lost until it ends, never over-admitted
	}
	return t
}

// Close gives back, through the cluster, what the client did not spend of
// its shares (Options.LocalShares), and takes no more; calls after it are
// sent as without shares. It returns once no node answers a denial the
// units given back would admit, or with the first error of a give-back;
// the units of a share not given back are lost until it ends.
func (c *Client) Close(ctx context.Context) error {
	if c.shares == nil {
		return nil
	}
	return c.giveBack(ctx, c.shares.Close(), false)
}

// giveBack gives back the units of returns, in the background (no one
// waits: the cluster answers without waiting out its deny leases) or not.
// It returns the first error.
func (c *Client) giveBack(ctx context.Context, returns []sharetable.Return[wire.ShareReturn], background bool) error {
	var first error
	for _, ret := range returns {
		body := ret.Key
		body.ID, body.Unspent, body.Background = ret.Token, ret.Unspent, background
		var out wire.ShareReturned
		if _, err := c.do(ctx, http.MethodPost, "/v1/shares/return", body, &out, http.StatusOK); err != nil && first == nil {
			first = err
		}
	}
	return first
}
