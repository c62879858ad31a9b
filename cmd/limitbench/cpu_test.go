package main

import (
	"os"
	"testing"
	"time"
)

func TestParseCPUTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{"a plain name", "1234 (limitnode) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0", 3 * time.Second, false},
		{"a name with spaces and parentheses", "99 (a (b) c) R 1 99 99 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 0 0", 100 * time.Millisecond, false},
		{"too few fields", "99 (x) R 1 2 3", 0, true},
		{"no name", "99 x R", 0, true},
		{"a field that is not a number", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 ten 5 0 0", 0, true},
	}
	for _, tt := range tests {
		got, err := parseCPUTime(tt.stat)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: %v, %v; want %v (error %v)", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestCPUWatchCountsWorkDone spins this process for a while and reads its
// own CPU time over it.
func TestCPUWatchCountsWorkDone(t *testing.T) {
	w := watchCPU([]serverProcess{selfProcess("me")})
	spin := time.Now().Add(200 * time.Millisecond)
	for n := 0; time.Now().Before(spin); n++ {
		_ = n * n
	}
	got, err := w.since(0.2, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// Spinning one core for 200 ms: at least one 10 ms tick, whatever else
	// the machine runs.
	if len(got) != 1 || got[0].PID != os.Getpid() || got[0].CPUSeconds < 0.01 || got[0].MicrosPerDecision != got[0].CPUSeconds*1e3 {
		t.Fatalf("%+v", got)
	}
	if _, err := watchCPU([]serverProcess{{Name: "gone", PID: -1}}).since(1, 1); err == nil {
		t.Fatal("read the CPU time of no process")
	}
}
