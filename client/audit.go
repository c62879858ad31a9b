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

// AuditEntry is one change an operator made (wire.AuditEntry): its log
// index, cluster time (Unix nanoseconds; the API gives milliseconds), the
// name of the token that asked, what, on what and how. It spells itself in
// JSON as the API does.
type AuditEntry struct {
	Index                          uint64
	AtNanos                        int64
	Actor, Action, Subject, Detail string
}

// MarshalJSON spells e as the API does (wire.AuditEntry).
func (e AuditEntry) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire.AuditEntry{Index: e.Index, AtUnixMS: e.AtNanos / int64(time.Millisecond), Actor: e.Actor,
		Action: e.Action, Subject: e.Subject, Detail: e.Detail})
}

// UnmarshalJSON reads e as the API spells it.
func (e *AuditEntry) UnmarshalJSON(data []byte) error {
	var w wire.AuditEntry
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*e = AuditEntry{Index: w.Index, AtNanos: int64(millis(w.AtUnixMS)), Actor: w.Actor, Action: w.Action, Subject: w.Subject, Detail: w.Detail}
	return nil
}

// AuditPage is a page of the audit trail (GET /v1/audit): changes oldest
// first; Next, when more follow, is the index to pass as since; Dropped is
// how many of the oldest the cluster no longer keeps.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    uint64       `json:"next,omitempty"`
	Dropped int64        `json:"dropped"`
}

// Audit returns up to limit changes (0: the server's default) recorded
// after log index since, oldest first; pass the page's Next as since for the
// next page.
func (c *Client) Audit(ctx context.Context, since uint64, limit int) (AuditPage, error) {
	q := url.Values{}
	if since > 0 {
		q.Set("since", strconv.FormatUint(since, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out AuditPage
	_, err := c.do(ctx, http.MethodGet, "/v1/audit?"+q.Encode(), nil, &out, http.StatusOK)
	return out, err
}
