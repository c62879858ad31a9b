// Command limitbench measures limitnode on this machine against the
// baselines a user would otherwise choose, in one run with one client
// machinery:
//
//   - trivial:    a net/http handler that answers a fixed body (the HTTP ceiling);
//   - redis:      redis-server running a Lua token bucket script, no persistence;
//   - redis-aof:  the same with appendfsync always (durable like limitnode);
//   - raft:       a 3-node limitnode cluster with group commit off: one Raft
//     Apply per request, the "bare Raft" baseline;
//   - http:       POST /v1/allow on a 3-node cluster, callers spread over all nodes;
//   - http-multi: the same with two checks per request (per key + global);
//   - http-batch: POST /v1/allow/batch, 100 requests per call;
//   - https:      POST /v1/allow over HTTPS (keep-alive, a decide token) on a
//     3-node cluster with mutual TLS between its nodes (-tls adds it);
//   - grpc:       Envoy's ShouldRateLimit on a 3-node cluster with one
//     descriptor per request (the caller's key), 4 connections per node,
//     callers spread over all nodes; grpc-multi the same with two (per key +
//     global, the gRPC twin of http-multi); grpc-flood the same with one of
//     8 hot values limited to 100/s each, as http-flood (an OVER_LIMIT
//     answer counts as a decision); the domain is in envoyproxy/ratelimit's
//     YAML, fixed windows (see benchDomain);
//   - grpc-secure: grpc over TLS with a decide token, on the cluster of https;
//   - erl:        envoyproxy/ratelimit, the reference rate limit service, on
//     its own redis-server without persistence, with grpc's domain and
//     descriptors over 4 connections; erl-flood with grpc-flood's; erl-cache
//     and erl-flood-cache the same with its local cache of keys over their
//     limit (LOCAL_CACHE_SIZE_IN_BYTES). limitbench starts the binary
//     -erl-binary names, with its configuration in a temporary directory,
//     for each target and round, and stops it after;
//   - http-flood: POST /v1/allow from every caller on one of 8 hot keys
//     limited to 100/s each, through all nodes: nearly every answer is a
//     429 (which counts as a decision); http-flood-nofast the same with
//     every denial appended to the log (cluster.Config.NoFastDenials);
//     redis-flood is Redis + Lua under the same flood;
//   - client, client-coalesced, client-shares: http's single calls through
//     the Go client (one client per node), as it is, with Options.Coalesce
//     (which sends concurrent calls together as batches), and with
//     Options.LocalShares and local shares on the limit (with -keys hot, a
//     hot key answered in process);
//   - embedded:   cluster.Node.Allow in process, callers spread over all nodes;
//   - http-shares, embedded-shares: http and embedded with local_shares on
//     the limit (with -keys hot, a hot key decided from shares); zipf and
//     zipf-shares: POST /v1/allow over Zipf-distributed keys (s 1.1, 100,000
//     keys) limited to 200/s each, without and with local shares (a 429
//     counts as a decision); embedded-zipf and embedded-zipf-shares the
//     same through the embedded API. These report which fractions of
//     their answers were denials and came from a local share;
//   - embedded-nostats, http-nostats: embedded and http on a cluster whose
//     nodes keep no decision statistics (cluster.Config.NoStats), to
//     measure what the statistics cost;
//   - http-flooded: http's single calls while 4 callers send batches of
//     1,000 requests of 4 checks (the most a batch holds) to the cluster;
//   - http-snapshotting: http while the nodes take turns to start a snapshot
//     every 2 s (give -preload keys to make them heavy); latencies count
//     only the calls that overlapped a snapshot (the samples column).
//
// Redis and erl targets run only when redis-server is on the PATH, erl
// targets only with -erl-binary. Each target is driven closed-loop by N
// callers (-callers), or open-loop at a fixed total rate (-rate, latency
// measured from each request's scheduled time, so a slow server cannot hide
// its queueing). Keys are many (-keys many) or one
// hot key (-keys hot). The table shows decisions/s, latency percentiles,
// errors, and each throughput as a ratio to the baselines of the same run;
// -json writes the same as JSON.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

type options struct {
	targets    []string
	callers    []int
	duration   time.Duration
	warmup     time.Duration
	rate       float64
	keys       string
	batch      int
	jsonPath   string
	noSync     bool
	inFlight   int
	failover   int
	cpuProfile string
	preload    int
	via        string
	stateKeys  int
	rounds     int
	erlBinary  string
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "limitbench:", err)
		os.Exit(1)
	}
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("limitbench", flag.ContinueOnError)
	targets := fs.String("targets", "trivial,redis,redis-aof,raft,http,http-multi,http-batch,embedded", "comma-separated targets (see the package doc)")
	callers := fs.String("callers", "1,64", "comma-separated caller counts (closed loop)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time per target and caller count")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured time before each measurement")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: total requests per second (0: closed loop)")
	fs.StringVar(&o.keys, "keys", "many", "many (a key per caller and request) or hot (one key)")
	fs.IntVar(&o.batch, "batch", 100, "requests per call for http-batch")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.BoolVar(&o.noSync, "no-sync", false, "run the limitnode clusters without fsync (cluster.Config.NoSync)")
	fs.IntVar(&o.inFlight, "in-flight", 0, "group-commit entries in flight per node for the limitnode cluster (cluster.Config.MaxEntriesInFlight; 0: its default)")
	fs.StringVar(&o.via, "via", "all", "which nodes the http and embedded callers use: all (spread), leader or follower")
	fs.IntVar(&o.stateKeys, "state-keys", 0, "also measure the replicated state with this many live keys: heap per key, snapshot and restore time")
	fs.IntVar(&o.preload, "preload", 0, "put this many keys into the limitnode cluster before measuring (state for snapshots to carry)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (client and nodes share the process) to this file")
	fs.IntVar(&o.failover, "failover", 0, "also measure failover this many times: kill -9 the leader, time the next successful decision")
	withTLS := fs.Bool("tls", false, "also measure https: POST /v1/allow over HTTPS with keep-alive and a token, on a cluster with mutual TLS between its nodes")
	fs.IntVar(&o.rounds, "rounds", 1, "measure every target this many times, round by round, and report the round with the median decisions/s for each (a shared machine drifts; rounds keep baselines and targets close in time)")
	fs.StringVar(&o.erlBinary, "erl-binary", "", "envoyproxy/ratelimit's service binary, for the erl targets (skipped without it)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for t := range strings.SplitSeq(*targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.targets = append(o.targets, t)
		}
	}
	if *withTLS && !slices.Contains(o.targets, "https") {
		o.targets = append(o.targets, "https")
	}
	for c := range strings.SplitSeq(*callers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return o, fmt.Errorf("-callers: %q is not a positive integer", c)
		}
		o.callers = append(o.callers, n)
	}
	if o.keys != "many" && o.keys != "hot" {
		return o, fmt.Errorf("-keys must be many or hot")
	}
	if o.via != "all" && o.via != "leader" && o.via != "follower" {
		return o, fmt.Errorf("-via must be all, leader or follower")
	}
	if o.rounds < 1 {
		return o, fmt.Errorf("-rounds must be at least 1")
	}
	return o, nil
}

func run(args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	env := newEnvironment(o)
	defer env.close()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	all, err := measureRounds(env, o, out)
	if err != nil {
		return err
	}
	results := medianRounds(all)
	addRatios(results)
	printTable(out, results)

	var failover *failoverResult
	if o.failover > 0 {
		f, err := env.measureFailover(o.failover)
		if err != nil {
			return fmt.Errorf("failover: %w", err)
		}
		failover = &f
		fmt.Fprintf(out, "\nfailover (kill the leader, time to the next decision), %d runs: median %s, max %s\n", len(f.Runs), f.Median, f.Max)
	}
	var state *stateResult
	if o.stateKeys > 0 {
		// Nothing else may allocate while the heap is measured: stop the
		// clusters (their Raft snapshots run on timers) and servers first.
		env.close()
		st, err := measureState(o.stateKeys)
		if err != nil {
			return fmt.Errorf("state: %w", err)
		}
		state = &st
		fmt.Fprintf(out, "\nstate of %d live token-bucket keys: %.0f bytes of heap per key; snapshot %.2fs (%.2fs holding the state lock), %.0f bytes per key; restore %.2fs\n",
			st.Keys, st.HeapBytesPerKey, st.SnapshotSeconds, st.LockedSeconds, st.DiskBytesPerKey, st.RestoreSeconds)
	}
	if o.jsonPath != "" {
		data, err := json.MarshalIndent(map[string]any{"results": results, "rounds": all, "failover": failover, "state": state, "options": o.describe()}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonPath, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// measureRounds measures every target at every caller count, o.rounds
// times, saying on out which targets this machine cannot run.
func measureRounds(env *environment, o options, out io.Writer) ([]result, error) {
	var all []result
	for round := 1; round <= o.rounds; round++ {
		for _, name := range o.targets {
			if why := unavailable(name, o, exec.LookPath); why != "" {
				if round == 1 {
					fmt.Fprintf(out, "skipping %s: %s\n", name, why)
				}
				continue
			}
			tgt, err := env.target(name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			for _, callers := range o.callers {
				r := measure(context.Background(), tgt, callers, o)
				r.Round = round
				all = append(all, r)
				fmt.Fprintf(os.Stderr, "round %d  %-10s %4d callers: %10.0f decisions/s  p50 %.3fms  p99 %.3fms  errors %d%s\n",
					round, r.Target, r.Callers, r.DecisionsPerSec, r.P50MS, r.P99MS, r.Errors, r.mix())
			}
			if s, ok := tgt.(interface{ stop() }); ok {
				s.stop()
			}
		}
	}
	return all, nil
}

// unavailable says why the target called name cannot run with these
// options on this machine (lookPath finds programs), or "" when it can:
// the Redis and erl targets need redis-server, the erl targets a binary.
func unavailable(name string, o options, lookPath func(string) (string, error)) string {
	erl := strings.HasPrefix(name, "erl")
	if erl && o.erlBinary == "" {
		return "-erl-binary is not set"
	}
	if erl || strings.HasPrefix(name, "redis") {
		if _, err := lookPath("redis-server"); err != nil {
			return "redis-server is not on the PATH"
		}
	}
	return ""
}

func (o options) describe() map[string]any {
	mode := "closed loop"
	if o.rate > 0 {
		mode = fmt.Sprintf("open loop at %.0f/s", o.rate)
	}
	return map[string]any{"duration": o.duration.String(), "mode": mode, "keys": o.keys, "batch": o.batch, "no_sync": o.noSync, "via": o.via}
}

// medianRounds returns, for each target and caller count in the order first
// measured, the round with the median decisions/s (the upper one of an even
// count): one whole measurement, not a mix of several rounds' figures.
func medianRounds(all []result) []result {
	type group struct {
		target  string
		callers int
	}
	var order []group
	rounds := map[group][]result{}
	for _, r := range all {
		g := group{r.Target, r.Callers}
		if rounds[g] == nil {
			order = append(order, g)
		}
		rounds[g] = append(rounds[g], r)
	}
	out := make([]result, 0, len(order))
	for _, g := range order {
		rs := rounds[g]
		slices.SortStableFunc(rs, func(a, b result) int { return cmp.Compare(a.DecisionsPerSec, b.DecisionsPerSec) })
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
// measured with the same number of callers.
func addRatios(results []result) {
	base := map[string]map[int]float64{}
	for _, r := range results {
		if base[r.Target] == nil {
			base[r.Target] = map[int]float64{}
		}
		base[r.Target][r.Callers] = r.DecisionsPerSec
	}
	ratio := func(target string, callers int, v float64) float64 {
		if b := base[target][callers]; b > 0 {
			return v / b
		}
		return 0
	}
	for i := range results {
		r := &results[i]
		r.VsTrivial = ratio("trivial", r.Callers, r.DecisionsPerSec)
		r.VsRedis = ratio("redis", r.Callers, r.DecisionsPerSec)
		r.VsRedisAOF = ratio("redis-aof", r.Callers, r.DecisionsPerSec)
		r.VsRaft = ratio("raft", r.Callers, r.DecisionsPerSec)
		r.VsERL = ratio(erlBaseline(r.Target), r.Callers, r.DecisionsPerSec)
	}
}

func printTable(out io.Writer, results []result) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "target\tcallers\tdecisions/s\tp50 ms\tp99 ms\tp999 ms\tsamples\terrors\t× trivial\t× redis\t× redis-aof\t× raft\t× erl\t")
	ratio := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", v)
	}
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.Target, r.Callers, r.DecisionsPerSec,
			r.P50MS, r.P99MS, r.P999MS, r.Samples, r.Errors, ratio(r.VsTrivial), ratio(r.VsRedis), ratio(r.VsRedisAOF), ratio(r.VsRaft), ratio(r.VsERL))
	}
	w.Flush()
}
