package fsm

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// BenchmarkStateBytesPerKey reports the heap the FSM holds per live key for
// each algorithm: 100,000 keys of 11 bytes each, admitted once (or, for
// the log, with 100 units live), measured after a garbage collection. It is
// a memory measurement, not a timing: run it with -benchtime 1x.
func BenchmarkStateBytesPerKey(b *testing.B) {
	const keys = 100_000
	minute := int64(time.Minute)
	cases := []struct {
		name  string
		limit algorithms.Limit
		cost  int64
	}{
		{"token_bucket", algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 100, Period: time.Duration(minute), Burst: 100}, 1},
		{"leaky_bucket", algorithms.Limit{Algorithm: algorithms.LeakyBucket, Rate: 100, Period: time.Duration(minute), Burst: 100}, 1},
		{"gcra", algorithms.Limit{Algorithm: algorithms.GCRA, Rate: 100, Period: time.Duration(minute), Burst: 100}, 1},
		{"fixed_window", algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 100, Period: time.Duration(minute)}, 1},
		{"sliding_window_counter", algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Rate: 100, Period: time.Duration(minute)}, 1},
		{"sliding_window_log/1_live", algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Rate: 100, Period: time.Duration(minute)}, 1},
		{"sliding_window_log/100_live", algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Rate: 100, Period: time.Duration(minute)}, 100},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				b.ReportMetric(heapPerKey(b, keys, tc.limit, tc.cost), "bytes/key")
			}
		})
	}
}

func heapPerKey(b *testing.B, keys int, l algorithms.Limit, cost int64) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	a := newApplier(b)
	for first := 0; first < keys; first += 1000 {
		reqs := make([]Request, 0, 1000)
		for i := first; i < first+1000 && i < keys; i++ {
			reqs = append(reqs, Request{Checks: []Check{inlineCheck(fmt.Sprintf("key-%07d", i), l, cost)}})
		}
		a.allow(t0, reqs...)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := a.fsm.Stats().Keys; got != keys {
		b.Fatalf("%d keys live, want %d", got, keys)
	}
	runtime.KeepAlive(a)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(keys)
}

// BenchmarkSnapshotAndRestore1M reports the time to snapshot (copy under
// the lock, then sort and write) and to restore a state of a million
// token-bucket keys. Run with -benchtime 1x.
func BenchmarkSnapshotAndRestore1M(b *testing.B) {
	const keys = 1_000_000
	a := newApplier(b)
	l := algorithms.Limit{Rate: 100, Period: time.Minute, Burst: 100}
	for first := 0; first < keys; first += 4096 {
		reqs := make([]Request, 0, 4096)
		for i := first; i < first+4096 && i < keys; i++ {
			reqs = append(reqs, Request{Checks: []Check{inlineCheck(fmt.Sprintf("key-%07d", i), l, 1)}})
		}
		a.allow(t0, reqs...)
	}
	for b.Loop() {
		start := time.Now()
		snap, err := a.fsm.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		copied := time.Since(start)
		sink := &memorySink{}
		if err := snap.Persist(sink); err != nil {
			b.Fatal(err)
		}
		persisted := time.Since(start)
		size := sink.Len()
		start = time.Now()
		if err := New(a.fsm.logger).Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
			b.Fatal(err)
		}
		restored := time.Since(start)
		b.ReportMetric(copied.Seconds(), "s-copy-under-lock")
		b.ReportMetric(persisted.Seconds(), "s-snapshot")
		b.ReportMetric(restored.Seconds(), "s-restore")
		b.ReportMetric(float64(size)/float64(keys), "bytes/key-on-disk")
	}
}

// BenchmarkLargePolicyBytes reports the heap the FSM holds for one policy
// at the bounds (MaxOverrides overrides of MaxKeyBytes keys) and the size
// of its log entry. A memory measurement: run it with -benchtime 1x.
func BenchmarkLargePolicyBytes(b *testing.B) {
	for b.Loop() {
		p := contract.Policy{Name: "big", Limit: algorithms.Limit{Rate: 10, Period: time.Second, Burst: 10}}
		for i := range contract.MaxOverrides {
			p.Overrides = append(p.Overrides, contract.Override{Key: fmt.Sprintf("%0*d", contract.MaxKeyBytes, i), Limit: p.Limit})
		}
		data, err := Encode(CommandPutPolicy, &p)
		if err != nil {
			b.Fatal(err)
		}
		p = contract.Policy{}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		a := newApplier(b)
		if r := a.raw(data); r != nil {
			b.Fatal(r)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(a)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB/policy")
		b.ReportMetric(float64(len(data))/(1<<20), "MiB/entry")
	}
}
