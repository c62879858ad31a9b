package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

// setRateLimitHeaders writes both generations of the IETF rate-limit
// headers for one decision:
//
//   - the older draft's RateLimit-Limit, RateLimit-Remaining and
//     RateLimit-Reset (delta seconds until the limit is fully available,
//     rounded up; never a timestamp, so clients need no synchronised clock
//     and do not all return at one instant);
//   - draft-ietf-httpapi-ratelimit-headers-10's structured fields
//     RateLimit-Policy: "<name>";q=<limit>;w=<period in seconds> and
//     RateLimit: "<name>";r=<remaining>;t=<seconds until more quota>.
//
// Seconds are rounded up, so a client that waits as told is never early.
func setRateLimitHeaders(h http.Header, policy string, d algorithms.Decision, periodNanos int64) {
	limit := strconv.FormatInt(d.Limit, 10)
	remaining := strconv.FormatInt(d.Remaining, 10)
	h.Set("RateLimit-Limit", limit)
	h.Set("RateLimit-Remaining", remaining)
	h.Set("RateLimit-Reset", strconv.FormatInt(ceilDiv(d.ResetAfterNanos, int64(time.Second)), 10))
	name := strconv.Quote(policy)
	h.Set("RateLimit-Policy", name+";q="+limit+";w="+strconv.FormatInt(ceilDiv(periodNanos, int64(time.Second)), 10))
	h.Set("RateLimit", name+";r="+remaining+";t="+strconv.FormatInt(ceilDiv(d.RefillAfterNanos, int64(time.Second)), 10))
}

// retryAfterHeader returns the Retry-After of a 429: the exact wait rounded
// up to whole seconds (at least 1), plus a random jitter of up to
// max(1s, 10% of the wait), so that clients denied together do not all
// return together. The jitter only ever adds: the header never points
// earlier than the time the request could be allowed.
func retryAfterHeader(retryAfterMS int64, jitter func(int64) int64) string {
	spreadMS := max(int64(1000), retryAfterMS/10)
	seconds := max(ceilDiv(retryAfterMS+jitter(spreadMS), 1000), 1)
	return strconv.FormatInt(seconds, 10)
}

// ceilDiv divides a non-negative a by b > 0, rounding up.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}
