package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/internal/ratelimitheader"
)

// A decision is read strictly: an answer whose fields are missing, of
// another JSON type, negative, or whose "allowed" disagrees with its status
// is ErrMalformedAnswer, which a Guard answers with its FailurePolicy,
// never a decision made up of zero values.

// decisionFields are the fields every decision has, as pointers so that a
// missing one is told from a zero one.
type decisionFields struct {
	Allowed      *bool  `json:"allowed"`
	Limit        *int64 `json:"limit"`
	Remaining    *int64 `json:"remaining"`
	ResetAfterMS *int64 `json:"reset_after_ms"`
	RetryAfterMS *int64 `json:"retry_after_ms"`
	WaitMS       *int64 `json:"wait_ms"`
	HeldMS       *int64 `json:"held_ms"`
}

// checkDecision reports what is wrong with raw as the body of a decision
// answered with status (200 or 429), or nil.
func checkDecision(raw []byte, status int) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return fmt.Errorf("null instead of a decision")
	}
	var f decisionFields
	if err := json.Unmarshal(raw, &f); err != nil {
		return err
	}
	if f.Allowed == nil {
		return fmt.Errorf("no \"allowed\"")
	}
	if *f.Allowed != (status == http.StatusOK) {
		return fmt.Errorf("\"allowed\": %v with status %d", *f.Allowed, status)
	}
	for _, n := range []struct {
		name     string
		value    *int64
		required bool
	}{{"limit", f.Limit, true}, {"remaining", f.Remaining, true}, {"reset_after_ms", f.ResetAfterMS, true},
		{"retry_after_ms", f.RetryAfterMS, true}, {"wait_ms", f.WaitMS, false}, {"held_ms", f.HeldMS, false}} {
		switch {
		case n.value == nil && n.required:
			return fmt.Errorf("no %q", n.name)
		case n.value != nil && *n.value < 0:
			return fmt.Errorf("%q is negative", n.name)
		}
	}
	return nil
}

// readDecision reads a /v1/allow answer that arrived at receivedAt.
func readDecision(a answered, receivedAt time.Time) (Decision, error) {
	host := a.resp.Request.URL.Host
	if err := checkDecision(a.body, a.resp.StatusCode); err != nil {
		return Decision{}, fmt.Errorf("%w: %s: %w", ErrMalformedAnswer, host, err)
	}
	var w wire.AllowResponse
	if err := json.Unmarshal(a.body, &w); err != nil {
		return Decision{}, fmt.Errorf("%w: %s: %w", ErrMalformedAnswer, host, err)
	}
	d, err := decisionOf(w)
	if err != nil {
		return Decision{}, fmt.Errorf("%w: %s: %w", ErrMalformedAnswer, host, err)
	}
	d.StatusCode, d.Header = a.resp.StatusCode, http.Header{}
	for _, name := range RateLimitHeaders {
		if v := a.resp.Header.Values(name); len(v) > 0 {
			d.Header[http.CanonicalHeaderKey(name)] = v
		}
	}
	d.Leader = a.resp.Header.Get("X-Limitnode-Leader")
	if !d.Allowed {
		d.RetryAfter = retryAfterOf(a.resp.Header.Get("Retry-After"))
	}
	d.ResetAt = resetAt(receivedAt, d.ResetAfter)
	return d, nil
}

// readBatch reads a /v1/allow/batch answer of n requests into out, each
// decided item checked as a decision.
func readBatch(a answered, n int, out *wire.BatchResponse) error {
	host := a.resp.Request.URL.Host
	var items struct {
		Responses []json.RawMessage `json:"responses"`
	}
	if err := json.Unmarshal(a.body, &items); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformedAnswer, host, err)
	}
	if len(items.Responses) != n {
		return fmt.Errorf("%w: %s: %d answers to a batch of %d", ErrMalformedAnswer, host, len(items.Responses), n)
	}
	for i, raw := range items.Responses {
		var status struct {
			Status *int `json:"status"`
		}
		if err := json.Unmarshal(raw, &status); err != nil || status.Status == nil {
			return fmt.Errorf("%w: %s: answer %d of a batch has no status (%v)", ErrMalformedAnswer, host, i, err)
		}
		if *status.Status == http.StatusOK || *status.Status == http.StatusTooManyRequests {
			if err := checkDecision(raw, *status.Status); err != nil {
				return fmt.Errorf("%w: %s: answer %d of a batch: %w", ErrMalformedAnswer, host, i, err)
			}
		}
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformedAnswer, host, err)
	}
	return nil
}

// resetAt is the local time a limit is fully available again, resetAfter
// after at.
func resetAt(at time.Time, resetAfter time.Duration) time.Time {
	return at.Add(min(resetAfter, maxResetAfter))
}

// maxResetAfter bounds ResetAt's distance from now, within what a
// time.Duration holds: a full bucket is at most 50 years of refill away.
const maxResetAfter = 100 * 365 * 24 * time.Hour

// millis is a duration the API gives in milliseconds.
func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// inMillis is d as the API gives it: whole milliseconds, rounded up.
func inMillis(d time.Duration) int64 {
	return ratelimitheader.CeilDiv(int64(d), int64(time.Millisecond))
}

// decisionOf is the Decision the body w spells.
func decisionOf(w wire.AllowResponse) (Decision, error) {
	d := Decision{Allowed: w.Allowed, Limit: w.Limit, Remaining: w.Remaining, ResetAfter: millis(w.ResetAfterMS),
		ExactRetryAfter: millis(w.RetryAfterMS), Wait: millis(w.WaitMS), Held: millis(w.HeldMS), Duplicate: w.Duplicate,
		SettlementID: w.SettlementID}
	if b := w.Blocked; b != nil {
		d.Blocked = &Blocked{Key: b.Key, Reason: b.Reason, Penalty: b.Penalty, EndsIn: millis(b.EndsInMS)}
	}
	if by := w.DeniedBy; by != nil {
		limit, err := limitFromWire(&by.Limit)
		if err != nil {
			return Decision{}, fmt.Errorf("denied_by.limit.%w", err)
		}
		d.DeniedBy = &DeniedBy{Check: by.Check, Policy: by.Policy, PolicyVersion: by.PolicyVersion, Limit: *limit, Cause: by.Cause}
	}
	for _, c := range w.Checks {
		d.Checks = append(d.Checks, CheckDecision{Key: c.Key, Policy: c.Policy, Shadow: c.Shadow, Allowed: c.Allowed,
			Limit: c.Limit, Remaining: c.Remaining, ResetAfter: millis(c.ResetAfterMS), ExactRetryAfter: millis(c.RetryAfterMS)})
	}
	if s := w.Share; s != nil {
		d.Share = &Share{ID: s.ID, Units: s.Units, SpendFor: millis(s.SpendForMS), Remaining: s.Remaining}
	}
	return d, nil
}

// Wire is d's body as the API spells it.
func (d Decision) Wire() wire.AllowResponse {
	w := wire.AllowResponse{Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining, ResetAfterMS: inMillis(d.ResetAfter),
		RetryAfterMS: inMillis(d.ExactRetryAfter), WaitMS: inMillis(d.Wait), HeldMS: inMillis(d.Held), Duplicate: d.Duplicate,
		SettlementID: d.SettlementID}
	if b := d.Blocked; b != nil {
		w.Blocked = &wire.Blocked{Key: b.Key, Reason: b.Reason, Penalty: b.Penalty, EndsInMS: inMillis(b.EndsIn)}
	}
	if by := d.DeniedBy; by != nil {
		w.DeniedBy = &wire.DeniedBy{Check: by.Check, Policy: by.Policy, PolicyVersion: by.PolicyVersion, Limit: *by.Limit.toWire(), Cause: by.Cause}
	}
	for _, c := range d.Checks {
		w.Checks = append(w.Checks, wire.CheckResponse{Key: c.Key, Policy: c.Policy, Shadow: c.Shadow, Allowed: c.Allowed,
			Limit: c.Limit, Remaining: c.Remaining, ResetAfterMS: inMillis(c.ResetAfter), RetryAfterMS: inMillis(c.ExactRetryAfter)})
	}
	if s := d.Share; s != nil {
		w.Share = &wire.Share{ID: s.ID, Units: s.Units, SpendForMS: inMillis(s.SpendFor), Remaining: s.Remaining}
	}
	return w
}

// MarshalJSON spells d as the body of a /v1/allow answer (Wire).
func (d Decision) MarshalJSON() ([]byte, error) { return json.Marshal(d.Wire()) }

// UnmarshalJSON reads the body of a /v1/allow answer into d's body fields.
func (d *Decision) UnmarshalJSON(data []byte) error {
	var w wire.AllowResponse
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	out, err := decisionOf(w)
	if err != nil {
		return err
	}
	*d = out
	return nil
}
