package holdtime

import (
	"testing"
	"time"
)

// TestTheHoldersArithmetic: each function with the clock-rate allowance
// and the margin in play, so that removing either changes an answer.
func TestTheHoldersArithmetic(t *testing.T) {
	const rate = 0.01
	ms := int64(time.Millisecond)
	tests := []struct {
		name      string
		got, want int64
	}{
		{"a second of cluster time is held 1s/1.01 less the margin", int64(Lasts(int64(time.Second), rate)), 990_099_009 - ms},
		{"at no clock drift, the margin alone", int64(Lasts(500*ms, 0)), 499 * ms},
		{"a span shorter than the margin is not held", int64(Lasts(ms/2, rate)), 495_049 - ms},
		{"100ms after sending, the latest cluster time is 101ms later", LatestClusterTime(1000*ms, 100*time.Millisecond, rate), 1101 * ms},
		{"with no drift, just the elapsed time", LatestClusterTime(1000*ms, 100*time.Millisecond, 0), 1100 * ms},
		{"a wait shortened by the time elapsed", Shorten(300*ms, 100*time.Millisecond), 200 * ms},
		{"a wait never below zero", Shorten(50*ms, 100*time.Millisecond), 0},
		{"a retry shortened by the time elapsed", RetryAfter(300*ms, 100*time.Millisecond), 200 * ms},
		{"a retry never below the margin", RetryAfter(50*ms, 100*time.Millisecond), ms},
		{"a retry shortened to more than the margin", RetryAfter(103*ms, 100*time.Millisecond), 3 * ms},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, tt.got, tt.want)
		}
	}
	if Lasts(ms/2, rate) >= 0 {
		t.Error("a span shorter than the margin must not be held")
	}
}
