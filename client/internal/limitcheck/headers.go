package limitcheck

import (
	"strconv"
	"time"

	"github.com/limitnode/limitnode/client"
)

// Header is one header (or gRPC metadata entry) of an answer.
type Header struct{ Name, Value string }

// Headers are the rate-limit headers to answer d with: those the cluster
// sent (Retry-After only when withRetry), or for a decision the Guard made
// itself (the cluster could not decide) the same computed from it, plus
// X-Limitnode-Degraded: true.
func Headers(d client.GuardDecision, withRetry bool) []Header {
	var out []Header
	if d.Header == nil {
		out = append(out, Header{"X-Limitnode-Degraded", "true"})
		if d.Limit > 0 {
			out = append(out,
				Header{"RateLimit-Limit", strconv.FormatInt(d.Limit, 10)},
				Header{"RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10)},
				Header{"RateLimit-Reset", strconv.FormatInt(ceilSeconds(d.ResetAfter), 10)})
		}
		if withRetry {
			out = append(out, Header{"Retry-After", strconv.FormatInt(max(ceilSeconds(d.ExactRetryAfter), 1), 10)})
		}
		return out
	}
	for _, name := range client.RateLimitHeaders {
		if name == "Retry-After" && !withRetry {
			continue
		}
		for _, v := range d.Header.Values(name) {
			out = append(out, Header{name, v})
		}
	}
	return out
}

// ceilSeconds is d in whole seconds, rounded up; 0 for no time.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
