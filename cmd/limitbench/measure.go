package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// target is one thing to measure. do performs one call for the caller and
// returns how many decisions it made.
type target interface {
	name() string
	do(ctx context.Context, caller int, seq int) (decisions int, err error)
}

// loadPoint is how a target is driven: closed loop by callers, or open
// loop at rate calls a second in all, sent by callers.
type loadPoint struct {
	callers int
	rate    float64 // 0: closed loop
}

func (p loadPoint) String() string {
	if p.rate > 0 {
		return fmt.Sprintf("open %g/s", p.rate)
	}
	return "closed"
}

// result is one measurement.
type result struct {
	Target  string `json:"target"`
	Callers int    `json:"callers"`
	Round   int    `json:"round"`
	// Mode is "closed" or "open"; Rate is the open loop's calls a second.
	Mode string  `json:"mode"`
	Rate float64 `json:"rate,omitempty"`
	// Where the target's servers ran: "processes" (the binary, the
	// reference, Redis) or "in process" (inside limitbench).
	Where           string  `json:"where"`
	Calls           int64   `json:"calls"`
	Decisions       int64   `json:"decisions"`
	Errors          int64   `json:"errors"`
	Unsent          int64   `json:"unsent,omitempty"`
	Seconds         float64 `json:"seconds"`
	DecisionsPerSec float64 `json:"decisions_per_sec"`
	P50MS           float64 `json:"p50_ms"`
	P99MS           float64 `json:"p99_ms"`
	P999MS          float64 `json:"p999_ms"`
	// Samples is how many latencies the percentiles are of: every decided
	// call, or only those during a snapshot for http-snapshotting.
	Samples int `json:"samples"`
	// CPU is what each server process, and limitbench itself, spent over
	// the measured window; CPUError why it could not be read.
	CPU      []processCPU `json:"cpu,omitempty"`
	CPUError string       `json:"cpu_error,omitempty"`
	// Stages are the limitnode nodes' stage histograms over the measured
	// window (stages.go).
	Stages []stageMean `json:"stages,omitempty"`
	// Profiles are the files of the nodes' CPU profiles over the
	// window (-node-profiles); ProfileError why one is missing.
	Profiles     []string `json:"profiles,omitempty"`
	ProfileError string   `json:"profile_error,omitempty"`
	VsTrivial    float64  `json:"vs_trivial,omitempty"`
	VsRedis      float64  `json:"vs_redis,omitempty"`
	VsRedisAOF   float64  `json:"vs_redis_aof,omitempty"`
	VsRaft       float64  `json:"vs_raft,omitempty"`
	// VsERL is against envoyproxy/ratelimit under the same load
	// (erlBaseline), VsERLCache against it with its local cache.
	VsERL      float64 `json:"vs_erl,omitempty"`
	VsERLCache float64 `json:"vs_erl_cache,omitempty"`
	// VsUnshared is a -shares target against the same target without
	// local shares.
	VsUnshared float64 `json:"vs_unshared,omitempty"`
	// DeniedFraction and SharedFraction are, for the targets that count
	// them (zipf), the fractions of answers that were denials and that a
	// local share decided.
	DeniedFraction float64 `json:"denied_fraction,omitempty"`
	SharedFraction float64 `json:"shared_fraction,omitempty"`
}

// point is the load the result measured.
func (r result) point() loadPoint { return loadPoint{callers: r.Callers, rate: r.Rate} }

// measure drives tgt at load point p for o.warmup, then measures for
// o.duration. Closed loop: each caller calls again as soon as it is
// answered. Open loop (p.rate > 0): calls follow one fixed-rate schedule,
// each sent at its time by whichever caller is free, and latency counts
// from the scheduled instant, so that time spent waiting behind slow calls
// is not hidden. Calls scheduled in the window but not sent within
// o.duration after it ends count as unsent, with the time they had waited.
func measure(ctx context.Context, tgt target, p loadPoint, o options) result {
	// A target may count only some calls' latencies (those during a
	// snapshot); which, it can tell only once the run is over.
	var filter func(from, to time.Time) bool
	if f, ok := tgt.(interface {
		latencyFilter() func(from, to time.Time) bool
	}); ok {
		filter = f.latencyFilter()
	}
	samples := make([]sample, p.callers)
	start := time.Now()
	w := window{start: start, from: start.Add(o.warmup), end: start.Add(o.warmup + o.duration)}
	w.drain = w.end.Add(o.duration)
	fractions := watchOutcomes(tgt, w.from)
	cpu := watchServers(tgt, w.from)
	stages := watchStages(tgt, w.from)
	profiles := watchProfiles(tgt, p, w, o.nodeProfiles)
	var sched *schedule
	if p.rate > 0 {
		sched = &schedule{start: start, rate: p.rate}
	}
	var wg sync.WaitGroup
	for c := range p.callers {
		wg.Go(func() { samples[c].run(ctx, tgt, c, w, sched, filter != nil) })
	}
	wg.Wait()
	elapsed := time.Since(w.from).Seconds()
	if filter != nil {
		for i := range samples {
			samples[i].keepFiltered(filter)
		}
	}
	r := summarize(tgt.name(), p, elapsed, samples)
	r.Where = whereOf(tgt)
	fractions(&r)
	cpu(&r)
	stages(&r)
	profiles(&r)
	return r
}

// whereOf says where tgt's servers run.
func whereOf(tgt target) string {
	if w, ok := tgt.(interface{ where() string }); ok {
		return w.where()
	}
	return whereInProcess
}

// watchServers reads the CPU time of tgt's server processes, and of
// limitbench itself, when the measured window opens, and returns a
// function that, once the run is over, puts what each spent into r.
func watchServers(tgt target, from time.Time) func(r *result) {
	var procs []serverProcess
	if s, ok := tgt.(serving); ok {
		procs = s.servers()
	}
	if !slices.ContainsFunc(procs, func(p serverProcess) bool { return p.PID == os.Getpid() }) {
		procs = append(procs, selfProcess("limitbench (load)"))
	}
	opened := make(chan *cpuWatch, 1)
	go func() {
		time.Sleep(time.Until(from))
		opened <- watchCPU(procs)
	}()
	return func(r *result) {
		cpu, err := (<-opened).since(r.Seconds, r.Decisions)
		if err != nil {
			r.CPUError = err.Error()
			return
		}
		r.CPU = cpu
	}
}

// sample is what one caller measured.
type sample struct {
	latencies              []time.Duration
	spans                  [][2]time.Time // scheduled and done, with a filter
	calls, decided, unsent int64
	errors                 int64
}

// window is when a run measures: callers call from start, and what they
// scheduled from from on, until end, counts. An open loop sends what was
// scheduled before end until drain.
type window struct {
	start, from, end, drain time.Time
}

// schedule is an open loop's fixed-rate schedule: slot k is due at
// start + k/rate. Callers claim slots in order, so a caller held up by a
// slow answer leaves the next slots to the others.
type schedule struct {
	start time.Time
	rate  float64
	next  atomic.Int64
}

// claim returns the next unclaimed slot's due time.
func (s *schedule) claim() time.Time {
	k := s.next.Add(1) - 1
	return s.start.Add(time.Duration(float64(k) / s.rate * float64(time.Second)))
}

// run is caller c's loop: call, time, repeat until the window ends; closed
// loop without a schedule, open loop with one.
func (s *sample) run(ctx context.Context, tgt target, c int, w window, sched *schedule, spans bool) {
	s.latencies = make([]time.Duration, 0, 1<<14)
	for seq := 0; ; seq++ {
		scheduled := time.Now()
		if sched != nil {
			scheduled = sched.claim()
		}
		if scheduled.After(w.end) {
			return
		}
		time.Sleep(time.Until(scheduled))
		counted := !scheduled.Before(w.from)
		if now := time.Now(); sched != nil && now.After(w.drain) {
			if counted {
				s.calls++
				s.unsent++
				s.latencies = append(s.latencies, now.Sub(scheduled))
			}
			continue
		}
		n, err := tgt.do(ctx, c, seq)
		done := time.Now()
		if !counted {
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
func summarize(name string, p loadPoint, elapsed float64, samples []sample) result {
	r := result{Target: name, Callers: p.callers, Mode: "closed", Rate: p.rate, Seconds: elapsed}
	if p.rate > 0 {
		r.Mode = "open"
	}
	var all []time.Duration
	for _, s := range samples {
		r.Calls += s.calls
		r.Decisions += s.decided
		r.Errors += s.errors
		r.Unsent += s.unsent
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
