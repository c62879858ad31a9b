package middleware

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/limitnode/limitnode/client"
)

// writeDenial answers 429 as the cluster's /v1/allow did: its rate-limit
// headers and Retry-After, its JSON body. A decision the Guard made itself
// (the cluster could not decide) gets the same headers and body computed
// from the decision, and X-Limitnode-Degraded: true.
func writeDenial(w http.ResponseWriter, d client.GuardDecision) {
	copyHeaders(w.Header(), d, true)
	body := d.Body
	if body == nil {
		body, _ = json.Marshal(d.Decision)
		body = append(body, '\n')
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
}

// copyHeaders sets the rate-limit headers of d on h, Retry-After only when
// withRetry.
func copyHeaders(h http.Header, d client.GuardDecision, withRetry bool) {
	if d.Header == nil {
		h.Set("X-Limitnode-Degraded", "true")
		if d.Limit > 0 {
			h.Set("RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
			h.Set("RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
			h.Set("RateLimit-Reset", strconv.FormatInt(ceilSeconds(d.ResetAfterMS), 10))
		}
		if withRetry {
			h.Set("Retry-After", strconv.FormatInt(max(ceilSeconds(d.RetryAfterMS), 1), 10))
		}
		return
	}
	for _, name := range client.RateLimitHeaders {
		if name == "Retry-After" && !withRetry {
			continue
		}
		if v, ok := d.Header[name]; ok {
			h[name] = v
		}
	}
}

func ceilSeconds(ms int64) int64 {
	if ms <= 0 {
		return 0
	}
	return (ms + 999) / 1000
}
