package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// envoyTimeout is how long Envoy's rate limit filter waits for an answer
// by default; past it, Envoy lets the request through unasked (or refuses
// it, with failure_mode_deny).
const envoyTimeout = 20 * time.Millisecond

// safeMissFraction is the most calls at a rate that may fail or go unsent
// for the rate to count as Envoy-safe: the 1% that p99 lets be slow.
const safeMissFraction = 0.01

// envoySafe is a target's Envoy-safe rate: the highest open-loop rate
// measured up to which every rate's p99 stays under envoyTimeout.
type envoySafe struct {
	Target  string `json:"target"`
	Callers int    `json:"callers"`
	// Rate is the Envoy-safe rate, 0 when even the lowest rate measured
	// was not; EveryRate says every rate measured was safe, so the true
	// one may be higher.
	Rate      float64   `json:"rate"`
	EveryRate bool      `json:"every_rate_safe"`
	Rates     []float64 `json:"rates_measured"`
	// VsERL and VsERLCache divide Rate by the reference's under the same
	// load, without and with its local cache (0 where either is unknown).
	VsERL      float64 `json:"vs_erl,omitempty"`
	VsERLCache float64 `json:"vs_erl_cache,omitempty"`
}

// safeAt says whether an open-loop result is inside Envoy's timeout: p99
// under it, and at most safeMissFraction of its calls failed or unsent.
func safeAt(r result) bool {
	missed := float64(r.Errors + r.Unsent)
	return r.Calls > 0 && r.P99MS < float64(envoyTimeout)/float64(time.Millisecond) && missed <= safeMissFraction*float64(r.Calls)
}

// envoySafeRates returns the Envoy-safe rate of every target and caller
// count measured open loop, in the order first measured.
func envoySafeRates(results []result) []envoySafe {
	type group struct {
		target  string
		callers int
	}
	var order []group
	sweeps := map[group][]result{}
	for _, r := range results {
		if r.Rate <= 0 {
			continue
		}
		g := group{r.Target, r.Callers}
		if sweeps[g] == nil {
			order = append(order, g)
		}
		sweeps[g] = append(sweeps[g], r)
	}
	var out []envoySafe
	index := map[group]int{}
	for _, g := range order {
		rs := sweeps[g]
		slices.SortFunc(rs, func(a, b result) int { return cmp.Compare(a.Rate, b.Rate) })
		s := envoySafe{Target: g.target, Callers: g.callers, EveryRate: true}
		for _, r := range rs {
			s.Rates = append(s.Rates, r.Rate)
			if s.EveryRate && safeAt(r) {
				s.Rate = r.Rate
			} else {
				s.EveryRate = false
			}
		}
		index[g] = len(out)
		out = append(out, s)
	}
	for i := range out {
		s := &out[i]
		ratio := func(target string) float64 {
			j, ok := index[group{target, s.Callers}]
			if !ok || out[j].Rate == 0 {
				return 0
			}
			return s.Rate / out[j].Rate
		}
		s.VsERL = ratio(erlBaseline(s.Target))
		s.VsERLCache = ratio(erlBaseline(s.Target) + "-cache")
	}
	return out
}

// printEnvoySafe writes the Envoy-safe rates, if any target was measured
// open loop.
func printEnvoySafe(out io.Writer, safe []envoySafe) {
	if len(safe) == 0 {
		return
	}
	fmt.Fprintf(out, "\nEnvoy-safe rate: the highest open-loop rate up to which p99 stays under %s (at most %.0f%% of calls failed or unsent)\n",
		envoyTimeout, 100*safeMissFraction)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "target\tcallers\tEnvoy-safe rate\t× erl\t× erl with its cache\trates measured\t")
	ratio := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", v)
	}
	for _, s := range safe {
		rate := fmt.Sprintf("%g/s", s.Rate)
		switch {
		case s.Rate == 0:
			rate = fmt.Sprintf("below %g/s", s.Rates[0])
		case s.EveryRate:
			rate = fmt.Sprintf("at least %g/s", s.Rate)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%v\t\n", s.Target, s.Callers, rate, ratio(s.VsERL), ratio(s.VsERLCache), s.Rates)
	}
	w.Flush()
}
