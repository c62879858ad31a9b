package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/limitnode/limitnode/api/wire"
)

// KeyState is what the cluster holds of one key: its state under each limit
// that has any (GET /v1/keys/{key}).
type KeyState struct {
	Key    string     `json:"key"`
	Limits []KeyLimit `json:"limits"`
}

// KeyLimit is a key's state under one limit (wire.KeyLimit): whose limit it
// is (a policy, "rls/" and an Envoy domain, or "" for an inline limit), the
// limit, and what a peek would be told now. It spells itself in JSON as the
// API does.
type KeyLimit struct {
	Owner      string
	Limit      Limit
	Remaining  int64
	ResetAfter time.Duration
}

// MarshalJSON spells l as the API does (wire.KeyLimit).
func (l KeyLimit) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire.KeyLimit{Owner: l.Owner, Limit: *l.Limit.toWire(), Remaining: l.Remaining, ResetAfterMS: inMillis(l.ResetAfter)})
}

// UnmarshalJSON reads l as the API spells it.
func (l *KeyLimit) UnmarshalJSON(data []byte) error {
	var w wire.KeyLimit
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	limit, err := limitFromWire(&w.Limit)
	if err != nil {
		return fmt.Errorf("limit.%w", err)
	}
	*l = KeyLimit{Owner: w.Owner, Limit: *limit, Remaining: w.Remaining, ResetAfter: millis(w.ResetAfterMS)}
	return nil
}

// KeyPage is a page of the live keys (GET /v1/keys): keys in order and,
// when more follow, Next, where the next page starts.
type KeyPage struct {
	Keys []KeyState `json:"keys"`
	Next string     `json:"next,omitempty"`
}

// Key returns what the cluster holds of key, consuming nothing; a 404
// *Error when it holds nothing.
func (c *Client) Key(ctx context.Context, key string) (KeyState, error) {
	var out KeyState
	_, err := c.do(ctx, http.MethodGet, "/v1/keys/"+url.PathEscape(key), nil, &out, http.StatusOK)
	return out, err
}

// Keys returns up to limit live keys (0: the server's default) that start
// with prefix and sort after after, with their state.
func (c *Client) Keys(ctx context.Context, prefix, after string, limit int) (KeyPage, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out KeyPage
	_, err := c.do(ctx, http.MethodGet, "/v1/keys?"+q.Encode(), nil, &out, http.StatusOK)
	return out, err
}

// ResetKey deletes key's state under every limit, on every node, and
// returns how many limits it held state under; a 404 *Error when it held
// none.
func (c *Client) ResetKey(ctx context.Context, key string) (int, error) {
	var out wire.KeyReset
	_, err := c.do(ctx, http.MethodDelete, "/v1/keys/"+url.PathEscape(key), nil, &out, http.StatusOK)
	return out.Limits, err
}
