package middleware

import (
	"encoding/json"
	"net/http"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/client/internal/limitcheck"
)

// writeDenial answers 429 as the cluster's /v1/allow did: its rate-limit
// headers and Retry-After, its top-level JSON fields (not the keys of its
// checks, nor a block's key, which may hold user or tenant IDs the client
// should not see: a block says only why and for how long). A
// decision the Guard made itself (the cluster could not decide) gets the
// same computed from the decision, and X-Limitnode-Degraded: true.
func writeDenial(w http.ResponseWriter, d client.GuardDecision) {
	setHeaders(w.Header(), d, true)
	top := d.Wire()
	top.Checks = nil
	if top.Blocked != nil {
		blocked := *top.Blocked
		blocked.Key = ""
		top.Blocked = &blocked
	}
	body, _ := json.Marshal(top)
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
}

// setHeaders sets the rate-limit headers of d on h, Retry-After only when
// withRetry. The cluster's, which d.Header holds alone and under their
// canonical names, are copied as they are.
func setHeaders(h http.Header, d client.GuardDecision, withRetry bool) {
	if d.Header == nil {
		for _, kv := range limitcheck.Headers(d, withRetry) {
			h.Set(kv.Name, kv.Value)
		}
		return
	}
	for name, values := range d.Header {
		if withRetry || name != "Retry-After" {
			h[name] = values
		}
	}
}
