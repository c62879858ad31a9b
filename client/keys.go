package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/limitnode/limitnode/api/wire"
)

// KeyState is what the cluster holds of one key: its state under each limit
// that has any (GET /v1/keys/{key}).
type KeyState = wire.KeyState

// KeyPage is a page of the live keys (GET /v1/keys).
type KeyPage = wire.KeyPage

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
