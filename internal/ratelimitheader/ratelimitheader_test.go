package ratelimitheader

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		retryAfterMS int64
		jitterPick   func(n int64) int64
		want         string
	}{
		{"a short wait with no jitter is one second", 1, func(int64) int64 { return 0 }, "1"},
		{"600ms with no jitter rounds up to 1s", 600, func(int64) int64 { return 0 }, "1"},
		{"600ms with the most jitter (1s) is 2s", 600, func(n int64) int64 { return n }, "2"},
		{"exactly 2s with no jitter stays 2s", 2000, func(int64) int64 { return 0 }, "2"},
		{"a minute spreads by up to 6s (10%)", 60000, func(n int64) int64 { return n }, "66"},
		{"a minute with no jitter is never early", 60000, func(int64) int64 { return 0 }, "60"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := RetryAfter(tt.retryAfterMS, tt.jitterPick); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRateLimitHeaderStrings(t *testing.T) {
	t.Parallel()
	h := map[string]string{}
	d := algorithms.Decision{Limit: 50, Remaining: 7, ResetAfter: time.Duration(1500 * int64(time.Millisecond)), RefillAfter: time.Duration(200 * int64(time.Millisecond))}
	for _, f := range Fields("burst", d, 50, int64(90*time.Second)) {
		h[f.Name] = f.Value
	}
	want := map[string]string{
		"RateLimit-Limit":     "50",
		"RateLimit-Remaining": "7",
		"RateLimit-Reset":     "2",
		"RateLimit-Policy":    `"burst";q=50;w=90`,
		"RateLimit":           `"burst";r=7;t=1`,
	}
	for name, v := range want {
		if got := h[name]; got != v {
			t.Errorf("%s: %q, want %q", name, got, v)
		}
	}
}

// TestRateLimitPolicyAdvertisesTheRate: the policy's q/w is the rate the
// limit sustains, and the remaining r never exceeds q. A token bucket of
// 100 a minute with a burst of 10 lets a client send 100 a minute (q=100);
// one of 10 a minute with a burst of 100 holds 100, refilled in ten
// minutes (q=100;w=600, where q=10;w=60 beside r=99 contradicted itself).
func TestRateLimitPolicyAdvertisesTheRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		limit, remaining  int64
		rate              int64
		period            time.Duration
		policy, rateLimit string
	}{
		{"a burst below the rate", 10, 9, 100, time.Minute, `"p";q=100;w=60`, `"p";r=9;t=0`},
		{"a burst above the rate", 100, 99, 10, time.Minute, `"p";q=100;w=600`, `"p";r=99;t=0`},
		{"a window", 60, 59, 60, time.Hour, `"p";q=60;w=3600`, `"p";r=59;t=0`},
		{"a burst a third over the rate, rounded up", 4, 4, 3, time.Second, `"p";q=4;w=2`, `"p";r=4;t=0`},
	}
	for _, tt := range tests {
		f := Fields("p", algorithms.Decision{Limit: tt.limit, Remaining: tt.remaining}, tt.rate, int64(tt.period))
		if f[3].Value != tt.policy || f[4].Value != tt.rateLimit || f[0].Value != strconv.FormatInt(tt.limit, 10) {
			t.Errorf("%s: RateLimit-Policy %s, RateLimit %s, RateLimit-Limit %s; want %s, %s, %d", tt.name, f[3].Value, f[4].Value, f[0].Value, tt.policy, tt.rateLimit, tt.limit)
		}
	}
}

// sfStringItem is RFC 9651's sf-string: printable ASCII but '"' and '\',
// which are escaped.
var sfStringItem = regexp.MustCompile(`^"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"$`)

// TestNamesAreStructuredFieldStrings: any name becomes a String a strict
// RFC 9651 parser accepts, and different names stay different.
func TestNamesAreStructuredFieldStrings(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, want string }{
		{"burst", `"burst"`},
		{"café", `"caf%C3%A9"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"50%", `"50%25"`},
		{"tab\there", `"tab%09here"`},
		{"日本", `"%E6%97%A5%E6%9C%AC"`},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := sfString(tt.name)
		if got != tt.want || !sfStringItem.MatchString(got) {
			t.Errorf("sfString(%q) = %s, want %s (an RFC 9651 String)", tt.name, got, tt.want)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q are both written %s", tt.name, other, got)
		}
		seen[got] = tt.name
	}
}
