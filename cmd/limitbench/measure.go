package main

import (
	"context"
	"slices"
	"sync"
	"time"
)

// target is one thing to measure. do performs one call for the caller and
// returns how many decisions it made.
type target interface {
	name() string
	do(ctx context.Context, caller int, seq int) (decisions int, err error)
}

// result is one measurement.
type result struct {
	Target          string  `json:"target"`
	Callers         int     `json:"callers"`
	Round           int     `json:"round"`
	Mode            string  `json:"mode"`
	Calls           int64   `json:"calls"`
	Decisions       int64   `json:"decisions"`
	Errors          int64   `json:"errors"`
	Seconds         float64 `json:"seconds"`
	DecisionsPerSec float64 `json:"decisions_per_sec"`
	P50MS           float64 `json:"p50_ms"`
	P99MS           float64 `json:"p99_ms"`
	P999MS          float64 `json:"p999_ms"`
	// Samples is how many latencies the percentiles are of: every decided
	// call, or only those during a snapshot for http-snapshotting.
	Samples    int     `json:"samples"`
	VsTrivial  float64 `json:"vs_trivial,omitempty"`
	VsRedis    float64 `json:"vs_redis,omitempty"`
	VsRedisAOF float64 `json:"vs_redis_aof,omitempty"`
	VsRaft     float64 `json:"vs_raft,omitempty"`
	// VsERL is against envoyproxy/ratelimit under the same load
	// (erlBaseline).
	VsERL float64 `json:"vs_erl,omitempty"`
	// DeniedFraction and SharedFraction are, for the targets that count
	// them (zipf), the fractions of answers that were denials and that a
	// local share decided.
	DeniedFraction float64 `json:"denied_fraction,omitempty"`
	SharedFraction float64 `json:"shared_fraction,omitempty"`
}

// measure drives tgt with callers for o.warmup, then measures for
// o.duration. Closed loop: each caller calls again as soon as it is
// answered. Open loop (o.rate > 0): calls are scheduled at a fixed total
// rate, spread over the callers, and latency counts from the scheduled
// instant, so that time spent waiting behind a slow call is not hidden.
func measure(ctx context.Context, tgt target, callers int, o options) result {
	// A target may count only some calls' latencies (those during a
	// snapshot); which, it can tell only once the run is over.
	var filter func(from, to time.Time) bool
	if f, ok := tgt.(interface {
		latencyFilter() func(from, to time.Time) bool
	}); ok {
		filter = f.latencyFilter()
	}
	samples := make([]sample, callers)
	start := time.Now()
	w := window{start: start, from: start.Add(o.warmup), end: start.Add(o.warmup + o.duration), rate: o.rate, callers: callers}
	fractions := watchOutcomes(tgt, w.from)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() { samples[c].run(ctx, tgt, c, w, filter != nil) })
	}
	wg.Wait()
	elapsed := time.Since(w.from).Seconds()
	if filter != nil {
		for i := range samples {
			samples[i].keepFiltered(filter)
		}
	}
	r := summarize(tgt.name(), callers, o.rate, elapsed, samples)
	fractions(&r)
	return r
}

// sample is what one caller measured.
type sample struct {
	latencies      []time.Duration
	spans          [][2]time.Time // scheduled and done, with a filter
	calls, decided int64
	errors         int64
}

// window is when a run measures: callers call from start, and what they
// scheduled from from on, until end, counts; at rate calls a second in all
// (open loop), or as fast as answers come (rate 0, closed loop).
type window struct {
	start, from, end time.Time
	rate             float64
	callers          int
}

// run is caller c's loop: call, time, repeat until the window ends.
func (s *sample) run(ctx context.Context, tgt target, c int, w window, spans bool) {
	s.latencies = make([]time.Duration, 0, 1<<14)
	for seq := 0; ; seq++ {
		scheduled := time.Now()
		if w.rate > 0 {
			// Slot seq*callers + c of a schedule at rate per second.
			slot := float64(seq*w.callers + c)
			scheduled = w.start.Add(time.Duration(slot / w.rate * float64(time.Second)))
			if wait := time.Until(scheduled); wait > 0 {
				time.Sleep(wait)
			}
		}
		if scheduled.After(w.end) || time.Now().After(w.end) {
			return
		}
		n, err := tgt.do(ctx, c, seq)
		done := time.Now()
		if scheduled.Before(w.from) {
			continue
		}
		s.calls++
		if err != nil {
			s.errors++
			continue
		}
		s.decided += int64(n)
		if spans {
			s.spans = append(s.spans, [2]time.Time{scheduled, done})
			continue
		}
		s.latencies = append(s.latencies, done.Sub(scheduled))
	}
}

// keepFiltered keeps the latencies of the spans filter counts.
func (s *sample) keepFiltered(filter func(from, to time.Time) bool) {
	for _, sp := range s.spans {
		if filter(sp[0], sp[1]) {
			s.latencies = append(s.latencies, sp[1].Sub(sp[0]))
		}
	}
}

// summarize is the result of every caller's samples.
func summarize(name string, callers int, rate, elapsed float64, samples []sample) result {
	r := result{Target: name, Callers: callers, Mode: "closed", Seconds: elapsed}
	if rate > 0 {
		r.Mode = "open"
	}
	var all []time.Duration
	for _, s := range samples {
		r.Calls += s.calls
		r.Decisions += s.decided
		r.Errors += s.errors
		all = append(all, s.latencies...)
	}
	r.DecisionsPerSec = float64(r.Decisions) / elapsed
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		i := min(int(p*float64(len(all))), len(all)-1)
		return float64(all[i]) / float64(time.Millisecond)
	}
	r.P50MS, r.P99MS, r.P999MS = pct(0.50), pct(0.99), pct(0.999)
	r.Samples = len(all)
	return r
}
