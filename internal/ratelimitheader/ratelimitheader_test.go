package ratelimitheader

import (
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
	d := algorithms.Decision{Limit: 50, Remaining: 7, ResetAfterNanos: 1500 * int64(time.Millisecond), RefillAfterNanos: 200 * int64(time.Millisecond)}
	for _, f := range Fields("burst", d, int64(90*time.Second)) {
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
