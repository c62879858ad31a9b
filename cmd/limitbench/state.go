package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// stateResult is the cost of the replicated state: heap per live key, and
// how long a snapshot and a restore of it take.
type stateResult struct {
	Keys            int     `json:"keys"`
	HeapBytesPerKey float64 `json:"heap_bytes_per_key"`
	SnapshotSeconds float64 `json:"snapshot_seconds"`
	LockedSeconds   float64 `json:"snapshot_locked_seconds"`
	RestoreSeconds  float64 `json:"restore_seconds"`
	DiskBytesPerKey float64 `json:"disk_bytes_per_key"`
}

type memorySink struct{ bytes.Buffer }

func (*memorySink) ID() string    { return "limitbench" }
func (*memorySink) Cancel() error { return nil }
func (*memorySink) Close() error  { return nil }

// measureState fills a state machine with keys live token buckets (through
// the same log entries a leader writes), then measures it.
func measureState(keys int) (stateResult, error) {
	res := stateResult{Keys: keys}
	limit := algorithms.Limit{Rate: 100, Period: time.Minute, Burst: 100}
	now := time.Now().UnixNano()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f := fsm.New(slog.New(slog.DiscardHandler))
	index := uint64(0)
	for first := 0; first < keys; first += 4096 {
		reqs := make([]fsm.Request, 0, 4096)
		for i := first; i < first+4096 && i < keys; i++ {
			reqs = append(reqs, fsm.Request{Checks: []fsm.Check{fsm.CheckOf(contract.Check{Key: fmt.Sprintf("key-%08d", i), Limit: limit, Cost: 1})}})
		}
		data, err := fsm.Encode(fsm.CommandAllow, &fsm.AllowCommand{NowNanos: now, Requests: reqs})
		if err != nil {
			return res, err
		}
		index++
		f.ApplyEntry(index, data)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	res.HeapBytesPerKey = float64(after.HeapAlloc-before.HeapAlloc) / float64(keys)

	start := time.Now()
	snap, err := f.Snapshot()
	if err != nil {
		return res, err
	}
	res.LockedSeconds = time.Since(start).Seconds()
	sink := &memorySink{}
	if err := snap.Persist(sink); err != nil {
		return res, err
	}
	res.SnapshotSeconds = time.Since(start).Seconds()
	res.DiskBytesPerKey = float64(sink.Len()) / float64(keys)
	start = time.Now()
	if err := fsm.New(slog.New(slog.DiscardHandler)).Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		return res, err
	}
	res.RestoreSeconds = time.Since(start).Seconds()
	runtime.KeepAlive(f)
	return res, nil
}
