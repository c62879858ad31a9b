package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
)

// recentChanges is how many changes the status page and /v1/stats show.
const recentChanges = 10

// auditToJSON is an audit entry as the API shows it.
func auditToJSON(e contract.AuditEntry) wire.AuditEntry {
	return wire.AuditEntry{Index: e.Index, AtUnixMS: e.AtNanos / int64(time.Millisecond), Actor: e.Actor, Action: e.Action, Subject: e.Subject, Detail: e.Detail}
}

// listAudit answers GET /v1/audit?since=INDEX&limit=N: the changes recorded
// after log index since, oldest first, and "next" when more follow.
func (a *API) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since uint64
	if s := q.Get("since"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			writeError(w, invalid("since", "since must be a log index, an integer from 0"))
			return
		}
		since = n
	}
	limit, apiErr := pageLimit(q, contract.DefaultAuditPage, contract.ValidateAuditPage)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	page, err := a.backend.Audit.Audit(r.Context(), since, limit)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	out := wire.AuditPage{Entries: make([]wire.AuditEntry, len(page.Entries)), Next: page.Next, Dropped: page.Dropped}
	for i, e := range page.Entries {
		out.Entries[i] = auditToJSON(e)
	}
	writeJSON(w, http.StatusOK, out)
}
