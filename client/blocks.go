package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/limitnode/limitnode/api/wire"
)

// Block is one blocked key (wire.Block): why, since and until when in
// cluster time (Unix nanoseconds; the API gives milliseconds), how long it
// has left as the node that answered read cluster time (EndsIn), and the
// policy whose penalty imposed it if one did. It spells itself in JSON as
// the API does.
type Block struct {
	Key, Reason, Penalty   string
	SinceNanos, UntilNanos int64
	EndsIn                 time.Duration
}

// MarshalJSON spells b as the API does (wire.Block).
func (b Block) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire.Block{Key: b.Key, Reason: b.Reason, Penalty: b.Penalty, SinceUnixMS: b.SinceNanos / int64(time.Millisecond),
		UntilUnixMS: b.UntilNanos / int64(time.Millisecond), EndsInMS: inMillis(b.EndsIn)})
}

// UnmarshalJSON reads b as the API spells it.
func (b *Block) UnmarshalJSON(data []byte) error {
	var w wire.Block
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*b = Block{Key: w.Key, Reason: w.Reason, Penalty: w.Penalty, SinceNanos: int64(millis(w.SinceUnixMS)),
		UntilNanos: int64(millis(w.UntilUnixMS)), EndsIn: millis(w.EndsInMS)}
	return nil
}

// BlockPage is a page of the blocked keys (GET /v1/blocks): the blocks in
// key order and, when more follow, Next, where the next page starts.
type BlockPage struct {
	Blocks []Block `json:"blocks"`
	Next   string  `json:"next,omitempty"`
}

// PutBlock blocks key for ttl of cluster time: every request that counts on
// it is denied, on every node and path, without touching its counters, and
// the answer says why (reason, which callers see). A block the key had is
// replaced.
func (c *Client) PutBlock(ctx context.Context, key string, ttl time.Duration, reason string) (Block, error) {
	var out Block
	ttlText := ttl.String()
	_, err := c.do(ctx, http.MethodPut, "/v1/blocks/"+url.PathEscape(key), wire.BlockRequest{TTL: &ttlText, Reason: reason}, &out, http.StatusOK)
	return out, err
}

// DeleteBlock lifts key's block and returns it as it was; a 404 *Error
// when the key is not blocked.
func (c *Client) DeleteBlock(ctx context.Context, key string) (Block, error) {
	var out Block
	_, err := c.do(ctx, http.MethodDelete, "/v1/blocks/"+url.PathEscape(key), nil, &out, http.StatusOK)
	return out, err
}

// Blocks returns up to limit blocked keys (0: the server's default) that
// sort after after.
func (c *Client) Blocks(ctx context.Context, after string, limit int) (BlockPage, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out BlockPage
	_, err := c.do(ctx, http.MethodGet, "/v1/blocks?"+q.Encode(), nil, &out, http.StatusOK)
	return out, err
}
