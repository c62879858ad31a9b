package testenv

import (
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

func TestOverTheLimitFindsTheIntervalThatBreaksIt(t *testing.T) {
	t.Parallel()
	sec := int64(time.Second)
	bucket := algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 2, Period: time.Second, Burst: 2}
	window := algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 2, Period: time.Second}
	tests := []struct {
		name       string
		limit      algorithms.Limit
		admissions []Admission
		over       bool
	}{
		{"a burst, then the refill", bucket, []Admission{{0, 2}, {sec / 2, 1}, {sec, 1}}, false},
		{"one more than the burst and the refill", bucket, []Admission{{0, 2}, {sec / 2, 2}}, true},
		{"a window's rate in each of two windows", window, []Admission{{sec - 1, 2}, {sec, 2}}, false},
		{"over the rate in one window", window, []Admission{{sec, 2}, {sec + 1, 1}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := OverTheLimit(tt.limit, tt.admissions); (got != "") != tt.over {
				t.Fatalf("OverTheLimit = %q, want over: %v", got, tt.over)
			}
		})
	}
}
