// Package ratelimitheader writes the rate-limit headers of a decision, the
// one spelling every surface uses: the HTTP API's answers and the headers
// the Envoy rate limit service asks Envoy to add.
package ratelimitheader

import (
	"strconv"
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

// Names are the headers that tell a caller its limit, in the order they
// are written: Fields', then Retry-After.
var Names = []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy", "RateLimit", "Retry-After"}

// Field is one header: its canonical name and value.
type Field struct{ Name, Value string }

// Fields are both generations of the IETF rate-limit headers for one
// decision, in the order of Names:
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
func Fields(policy string, d algorithms.Decision, periodNanos int64) [5]Field {
	limit := strconv.FormatInt(d.Limit, 10)
	remaining := strconv.FormatInt(d.Remaining, 10)
	name := strconv.Quote(policy)
	return [5]Field{
		{"RateLimit-Limit", limit},
		{"RateLimit-Remaining", remaining},
		{"RateLimit-Reset", strconv.FormatInt(CeilDiv(d.ResetAfterNanos, int64(time.Second)), 10)},
		{"RateLimit-Policy", name + ";q=" + limit + ";w=" + strconv.FormatInt(CeilDiv(periodNanos, int64(time.Second)), 10)},
		{"RateLimit", name + ";r=" + remaining + ";t=" + strconv.FormatInt(CeilDiv(d.RefillAfterNanos, int64(time.Second)), 10)},
	}
}

// RetryAfter returns the Retry-After of a denial: the exact wait rounded
// up to whole seconds (at least 1), plus a random jitter of up to
// max(1s, 10% of the wait), so that clients denied together do not all
// return together. The jitter only ever adds: the header never points
// earlier than the time the request could be allowed. jitter(n) returns a
// uniformly random integer in [0, n].
func RetryAfter(retryAfterMS int64, jitter func(int64) int64) string {
	spreadMS := max(int64(1000), retryAfterMS/10)
	seconds := max(CeilDiv(retryAfterMS+jitter(spreadMS), 1000), 1)
	return strconv.FormatInt(seconds, 10)
}

// CeilDiv divides a non-negative a by b > 0, rounding up; 0 for a ≤ 0.
func CeilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}
