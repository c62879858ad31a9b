// Package ratelimitheader writes the rate-limit headers of a decision, the
// one spelling every surface uses: the HTTP API's answers and the headers
// the Envoy rate limit service asks Envoy to add.
package ratelimitheader

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
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
//     RateLimit-Policy: "<name>";q=<rate>;w=<period in seconds> and
//     RateLimit: "<name>";r=<remaining>;t=<seconds until more quota>.
//     The quota q is the limit's capacity, so that the remaining r never
//     exceeds it, and the window w the time the limit takes to grant q
//     at its rate: for the windows and a bucket whose burst is its rate,
//     the rate per period; for a bucket of burst 100 refilling 10 a
//     minute, q=100;w=600. Either way q/w is the rate the limit sustains,
//     so a client that paces itself by it sends what the limit allows.
//     The name is an RFC 9651 String:
//     printable ASCII, with '"' and '\' escaped; any other byte (UTF-8
//     of a name that is not ASCII, a control character) and '%' itself are
//     written as %XX, so a strict parser never drops the field.
//
// Seconds are rounded up, so a client that waits as told is never early.
func Fields(policy string, d algorithms.Decision, rate, periodNanos int64) [5]Field {
	limit := strconv.FormatInt(d.Limit, 10)
	remaining := strconv.FormatInt(d.Remaining, 10)
	name := sfString(policy)
	quota, window := quotaWindow(d.Limit, rate, periodNanos)
	return [5]Field{
		{"RateLimit-Limit", limit},
		{"RateLimit-Remaining", remaining},
		{"RateLimit-Reset", strconv.FormatInt(CeilDiv(int64(d.ResetAfter), int64(time.Second)), 10)},
		{"RateLimit-Policy", name + ";q=" + strconv.FormatInt(quota, 10) + ";w=" + strconv.FormatInt(CeilDiv(window, int64(time.Second)), 10)},
		{"RateLimit", name + ";r=" + remaining + ";t=" + strconv.FormatInt(CeilDiv(int64(d.RefillAfter), int64(time.Second)), 10)},
	}
}

// quotaWindow is RateLimit-Policy's quota and window (nanoseconds) for a
// limit of capacity that grants rate per periodNanos: the capacity, over
// the time the rate takes to grant it (no shorter than the period).
func quotaWindow(capacity, rate, periodNanos int64) (quota, windowNanos int64) {
	if capacity <= rate || rate <= 0 {
		return max(rate, capacity), periodNanos
	}
	// capacity × period / rate, in 128 bits: both may be large.
	hi, lo := bits.Mul64(uint64(capacity), uint64(periodNanos))
	q, _ := bits.Div64(hi%uint64(rate), lo, uint64(rate))
	if hi/uint64(rate) > 0 || q > math.MaxInt64 {
		return capacity, math.MaxInt64
	}
	return capacity, int64(q)
}

// sfString is s as an RFC 9651 String item: quoted, '"' and '\\' escaped,
// bytes outside printable ASCII and '%' percent-encoded.
func sfString(s string) string {
	return string(appendPrintable([]byte{'"'}, s, true)) + `"`
}

// Printable is s with every byte outside printable ASCII, and '%', written
// as %XX: a header or gRPC metadata value any peer accepts.
func Printable(s string) string { return string(appendPrintable(nil, s, false)) }

// appendPrintable appends s to out percent-encoded as Printable does, and
// with '"' and '\\' escaped when quoted.
func appendPrintable(out []byte, s string, quoted bool) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && (c == '"' || c == '\\'):
			out = append(out, '\\', c)
		case c == '%' || c < 0x20 || c > 0x7e:
			out = append(out, '%', hex[c>>4], hex[c&0xf])
		default:
			out = append(out, c)
		}
	}
	return out
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

// DeniedByName is the header that says what denied a request.
const DeniedByName = "Limitnode-Denied-By"

// Denial is what DeniedBy writes of a denial.
type Denial struct {
	// Policy names the policy as Fields does ("default" for an inline
	// limit).
	Policy string
	// Index is the check's index, as the parameter Param ("check", or
	// "descriptor" for Envoy's rate limit service).
	Index int
	Param string
	// Version is the policy's version (the log index of its last change),
	// 0 for none.
	Version uint64
	// Cause is "limit", "block" or "penalty"; Reason a block's reason.
	Cause  string
	Reason string
	// Limit is the limit that denied.
	Limit algorithms.Limit
}

// DeniedBy is the value of Limitnode-Denied-By: an RFC 9651 Item, the
// policy's name as a String (written as Fields writes it) with parameters:
// the check's index, the version (when there is one), the cause (a Token),
// the limit (algorithm a Token, rate, period_ms, burst for the algorithms
// that have one) and a block's reason (a String) when it has one:
//
//	"per-user";check=0;version=17;cause=limit;algorithm=token_bucket;rate=100;period_ms=60000;burst=100
func DeniedBy(d Denial) string {
	var b strings.Builder
	b.WriteString(sfString(d.Policy))
	b.WriteString(";" + d.Param + "=" + strconv.Itoa(d.Index))
	if d.Version > 0 {
		b.WriteString(";version=" + strconv.FormatUint(d.Version, 10))
	}
	b.WriteString(";cause=" + d.Cause)
	b.WriteString(";algorithm=" + d.Limit.Algorithm.String())
	b.WriteString(";rate=" + strconv.FormatInt(d.Limit.Rate, 10))
	b.WriteString(";period_ms=" + strconv.FormatInt(CeilDiv(int64(d.Limit.Period), int64(time.Millisecond)), 10))
	if d.Limit.Algorithm.IsBucket() {
		b.WriteString(";burst=" + strconv.FormatInt(d.Limit.Burst, 10))
	}
	if d.Reason != "" {
		b.WriteString(";reason=" + sfString(d.Reason))
	}
	return b.String()
}
