package clusterclock

import (
	"math"
	"testing"
	"time"
)

func noCeiling(uint64) int64 { return math.MaxInt64 }

// TestAStampStaysWithinAStepOfTheClusterTime: a leader's wall clock is
// taken as it is when it is right, and clamped to the cluster time the last
// applied entry and the real time since predict when it is minutes off.
func TestAStampStaysWithinAStepOfTheClusterTime(t *testing.T) {
	const step = time.Second
	tests := []struct {
		name   string
		skew   time.Duration // of the leader's wall clock
		lowest time.Duration // the stamp's least offset from the cluster time
		high   time.Duration // and its greatest
	}{
		{"a right clock is stamped as it is", 0, -50 * time.Millisecond, 50 * time.Millisecond},
		{"a clock minutes fast moves time no further than the estimate", 10 * time.Minute, -50 * time.Millisecond, 50 * time.Millisecond},
		{"a clock minutes slow moves time at most a step behind", -10 * time.Minute, -step - 50*time.Millisecond, -step + 50*time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clusterNow := time.Now().Add(time.Hour) // the cluster's time, not this machine's
			c := New(func() time.Time { return clusterNow.Add(tt.skew) }, step, 0.01, 0, noCeiling)
			c.Observe(1, clusterNow.UnixNano())
			got := time.Duration(c.Stamp(1, 0) - clusterNow.UnixNano())
			if got < tt.lowest || got > tt.high {
				t.Fatalf("stamp is %v from the cluster time, want within [%v, %v]", got, tt.lowest, tt.high)
			}
		})
	}
}

// TestAStampNeverPassesTheCeiling: the state machine's ceiling for a term
// bounds the stamp, whatever the wall clock says.
func TestAStampNeverPassesTheCeiling(t *testing.T) {
	now := time.Now()
	ceiling := now.Add(-time.Minute).UnixNano()
	c := New(func() time.Time { return now }, time.Second, 0.01, 0, func(uint64) int64 { return ceiling })
	if got := c.Stamp(1, 0); got != ceiling {
		t.Fatalf("stamp %d, want the ceiling %d", got, ceiling)
	}
}

// TestATickIsDueOnlyAfterARestartOrALongIdle: a clock that has seen no
// stamped entry since it opened on a log asks for a tick; one opened on no
// log, or that has just seen an entry, does not.
func TestATickIsDueOnlyAfterARestartOrALongIdle(t *testing.T) {
	tests := []struct {
		name         string
		startupIndex uint64
		observed     bool
		want         bool
	}{
		{"a new cluster waits for its first entry", 0, false, false},
		{"a restarted node asks for a tick", 5, false, true},
		{"an entry just applied makes a tick needless", 5, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(time.Now, time.Second, 0.01, tt.startupIndex, noCeiling)
			if tt.observed {
				c.Observe(tt.startupIndex+1, time.Now().UnixNano())
			}
			if got := c.TickDue(); got != tt.want {
				t.Fatalf("TickDue() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestEntriesReplayedAtStartUpAreNotObserved: entries up to the log's last
// index at start-up say nothing about how much time has passed since.
func TestEntriesReplayedAtStartUpAreNotObserved(t *testing.T) {
	c := New(time.Now, time.Second, 0.01, 10, noCeiling)
	c.Observe(10, time.Now().Add(-time.Hour).UnixNano())
	if got := c.Estimate(); got != 0 {
		t.Fatalf("Estimate() = %d after a replayed entry, want 0 (none observed)", got)
	}
}
