package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// loadProcessName is limitbench's own entry in a result's CPU when the
// servers run elsewhere: the load, not a server.
const loadProcessName = "limitbench (load)"

// medianRounds returns, for each target and load point in the order first
// measured, the round with the median figure (the upper one of an even
// count): decisions/s closed loop, p99 open loop, where every round
// decides about the rate asked. Each is one whole measurement, not a mix
// of several rounds' figures.
func medianRounds(all []result) []result {
	type group struct {
		target string
		point  loadPoint
	}
	var order []group
	rounds := map[group][]result{}
	for _, r := range all {
		g := group{r.Target, r.point()}
		if rounds[g] == nil {
			order = append(order, g)
		}
		rounds[g] = append(rounds[g], r)
	}
	out := make([]result, 0, len(order))
	for _, g := range order {
		rs := rounds[g]
		slices.SortStableFunc(rs, func(a, b result) int {
			if g.point.rate > 0 {
				return cmp.Compare(a.P99MS, b.P99MS)
			}
			return cmp.Compare(a.DecisionsPerSec, b.DecisionsPerSec)
		})
		out = append(out, rs[len(rs)/2])
	}
	return out
}

// erlBaseline is the erl target under the same load as the target called
// name: erl-flood for a flood, erl otherwise.
func erlBaseline(name string) string {
	if strings.Contains(name, "flood") {
		return "erl-flood"
	}
	return "erl"
}

// addRatios fills each result's throughput relative to the baselines
// measured at the same load point.
func addRatios(results []result) {
	base := map[string]map[loadPoint]float64{}
	for _, r := range results {
		if base[r.Target] == nil {
			base[r.Target] = map[loadPoint]float64{}
		}
		base[r.Target][r.point()] = r.DecisionsPerSec
	}
	for i := range results {
		r := &results[i]
		ratio := func(target string) float64 {
			if b := base[target][r.point()]; b > 0 {
				return r.DecisionsPerSec / b
			}
			return 0
		}
		r.VsTrivial = ratio("trivial")
		r.VsRedis = ratio("redis")
		r.VsRedisAOF = ratio("redis-aof")
		r.VsRaft = ratio("raft")
		r.VsERL = ratio(erlBaseline(r.Target))
		r.VsERLCache = ratio(erlBaseline(r.Target) + "-cache")
		if unshared, ok := strings.CutSuffix(r.Target, "-shares"); ok {
			r.VsUnshared = ratio(unshared)
		}
	}
}

// ratioColumn is one of the table's ratio columns.
type ratioColumn struct {
	title string
	of    func(result) float64
}

var ratioColumns = []ratioColumn{
	{"× trivial", func(r result) float64 { return r.VsTrivial }},
	{"× redis", func(r result) float64 { return r.VsRedis }},
	{"× redis-aof", func(r result) float64 { return r.VsRedisAOF }},
	{"× raft", func(r result) float64 { return r.VsRaft }},
	{"× erl", func(r result) float64 { return r.VsERL }},
	{"× erl with its cache", func(r result) float64 { return r.VsERLCache }},
	{"× without shares", func(r result) float64 { return r.VsUnshared }},
}

// printTable writes the results, with the ratio columns that some result
// has.
func printTable(out io.Writer, results []result) {
	var cols []ratioColumn
	for _, c := range ratioColumns {
		if slices.ContainsFunc(results, func(r result) bool { return c.of(r) != 0 }) {
			cols = append(cols, c)
		}
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "target\tservers\tload\tcallers\tdecisions/s\tp50 ms\tp99 ms\tp999 ms\tsamples\terrors\tunsent\t")
	for _, c := range cols {
		fmt.Fprint(w, c.title+"\t")
	}
	fmt.Fprintln(w, "busiest server µs/decision\t")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%d\t", r.Target, r.Where, r.point(), r.Callers, r.DecisionsPerSec,
			r.P50MS, r.P99MS, r.P999MS, r.Samples, r.Errors, r.Unsent)
		for _, c := range cols {
			if v := c.of(r); v != 0 {
				fmt.Fprintf(w, "%.2f\t", v)
			} else {
				fmt.Fprint(w, "-\t")
			}
		}
		fmt.Fprintln(w, strings.TrimSpace(r.busiest())+"\t")
	}
	w.Flush()
}

// servers are the result's CPU entries but limitbench's load.
func (r result) servers() []processCPU {
	return slices.DeleteFunc(slices.Clone(r.CPU), func(c processCPU) bool { return c.Name == loadProcessName })
}

// busiest is the server that spent the most CPU per decision, as "  name
// N µs", or "" when none was read.
func (r result) busiest() string {
	servers := r.servers()
	if len(servers) == 0 {
		return ""
	}
	top := slices.MaxFunc(servers, func(a, b processCPU) int { return cmp.Compare(a.MicrosPerDecision, b.MicrosPerDecision) })
	return fmt.Sprintf("  %s %.0f µs", top.Name, top.MicrosPerDecision)
}

// printCPU writes what each process spent per decision, and the servers
// together: µs of CPU per decision and cores kept busy.
func printCPU(out io.Writer, results []result) {
	fmt.Fprintln(out, "\nCPU per decision (utime+stime from /proc over the measured window): µs per decision (cores busy)")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "target\tload\tcallers\tdecisions/s\tservers together\tper process\t")
	for _, r := range results {
		if r.CPUError != "" {
			fmt.Fprintf(w, "%s\t%s\t%d\t%.0f\t-\t%s\t\n", r.Target, r.point(), r.Callers, r.DecisionsPerSec, r.CPUError)
			continue
		}
		var sum float64
		for _, c := range r.servers() {
			sum += c.MicrosPerDecision
		}
		var each []string
		for _, c := range r.CPU {
			each = append(each, fmt.Sprintf("%s %.1f (%.2f)", c.Name, c.MicrosPerDecision, c.Cores))
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%.0f\t%.1f\t%s\t\n", r.Target, r.point(), r.Callers, r.DecisionsPerSec, sum, strings.Join(each, "; "))
	}
	w.Flush()
}
