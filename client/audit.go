package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/limitnode/limitnode/api/wire"
)

// AuditEntry is one change an operator made (wire.AuditEntry): its log
// index, cluster time, the name of the token that asked, what, on what and
// how.
type AuditEntry = wire.AuditEntry

// AuditPage is a page of the audit trail (GET /v1/audit).
type AuditPage = wire.AuditPage

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
