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
//     only the calls that overlapped a snapshot (the samples column);
//   - http-hot, http-hot-shares: http and http-shares on one hot key,
//     whatever -keys says, so one run can compare a hot key with and
//     without local shares beside targets on many keys; grpc-hot and
//     grpc-hot-shares the same over gRPC: one hot descriptor of a domain of
//     their own (bench-hot, see benchHotDomain), without and with
//     local_shares on its rate_limit.
//
// Where the servers run. By default the cluster targets call the limitnode
// binary as users run it: built from this tree (or -limitnode-binary),
// started as three processes with README.md's flags for a three-node
// cluster (plus -grpc); -in-process runs testcluster's nodes inside
// limitbench instead, as the Go API's targets (embedded*, raft) always do.
// Targets whose cluster needs a setting the binary has no flag for (https,
// grpc-secure, http-nostats, http-flood-nofast, http-snapshotting) run only
// with -in-process. Every result says where its servers ran.
//
// Redis and erl targets run only when redis-server is found (-redis-server),
// erl targets only with -erl-binary. Each target is driven closed-loop by N
// callers (-callers), and open-loop at each of -rates (-open-callers send
// the calls of one fixed-rate schedule, each at its time by whichever is
// free; latency counts from the scheduled time, so a slow server cannot
// hide its queueing). From the open loop the tool reports each target's
// Envoy-safe rate: the highest rate up to which p99 stays under Envoy's
// default 20 ms timeout. Keys are many (-keys many) or one hot key (-keys
// hot). The tables show decisions/s, latency percentiles, errors, each
// throughput as a ratio to the baselines of the same run, and the CPU time
// each server process (and limitbench) spent per decision, read from
// /proc; -json writes the same as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

type options struct {
	targets     []string
	callers     []int
	rates       []float64
	openCallers int
	duration    time.Duration
	warmup      time.Duration
	keys        string
	batch       int
	jsonPath    string
	noSync      bool
	inFlight    int
	failover    int
	cpuProfile  string
	// nodeProfiles, when set, is a directory for a CPU profile of every
	// limitnode process over each measured window (its -pprof).
	nodeProfiles string
	preload      int
	via          string
	stateKeys    int
	rounds       int
	erlBinary    string
	// redisServer is the redis-server binary for the redis and erl targets.
	redisServer string
	// inProcess runs the network targets' clusters inside limitbench;
	// limitnodeBinary, if set, is run instead of building the binary.
	inProcess       bool
	limitnodeBinary string
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
	callers := fs.String("callers", "1,64", "comma-separated caller counts, each measured closed loop; empty for none (with -rates)")
	rates := fs.String("rates", "", "comma-separated total rates (calls/s), each measured open loop by -open-callers callers")
	fs.IntVar(&o.openCallers, "open-callers", 256, "callers that send the open loop's calls (-rates)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time per target and caller count")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured time before each measurement")
	fs.StringVar(&o.keys, "keys", "many", "many (a key per caller and request) or hot (one key)")
	fs.IntVar(&o.batch, "batch", 100, "requests per call for http-batch")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.BoolVar(&o.noSync, "no-sync", false, "run the limitnode clusters without fsync (cluster.Config.NoSync)")
	fs.IntVar(&o.inFlight, "in-flight", 0, "group-commit entries the leader may have under way at once, each from its append until applied, for the in-process clusters (cluster.Config.MaxEntriesInFlight; 0: its default, 1)")
	fs.StringVar(&o.via, "via", "all", "which nodes the http and embedded callers use: all (spread), leader or follower")
	fs.IntVar(&o.stateKeys, "state-keys", 0, "also measure the replicated state with this many live keys: heap per key, snapshot and restore time")
	fs.IntVar(&o.preload, "preload", 0, "put this many keys into the limitnode cluster before measuring (state for snapshots to carry)")
	fs.StringVar(&o.nodeProfiles, "node-profiles", "", "start the limitnode processes with -pprof and write a CPU profile of each over every measured window into this directory (TARGET-LOAD-NODE.pprof)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of limitbench's process to this file (the load, and with -in-process the nodes too)")
	fs.IntVar(&o.failover, "failover", 0, "also measure failover this many times on an in-process cluster: kill the leader, time the next successful decision")
	withTLS := fs.Bool("tls", false, "also measure https: POST /v1/allow over HTTPS with keep-alive and a token, on a cluster with mutual TLS between its nodes")
	fs.IntVar(&o.rounds, "rounds", 1, "measure every target this many times, round by round, and report the round with the median decisions/s for each (a shared machine drifts; rounds keep baselines and targets close in time)")
	fs.StringVar(&o.erlBinary, "erl-binary", "", "envoyproxy/ratelimit's service binary, for the erl targets (skipped without it)")
	fs.StringVar(&o.redisServer, "redis-server", "redis-server", "redis-server binary for the redis and erl targets (skipped when not found), a path or a name on the PATH")
	fs.BoolVar(&o.inProcess, "in-process", false, "run the network targets' 3-node clusters inside limitbench instead of as three processes of the limitnode binary")
	fs.StringVar(&o.limitnodeBinary, "limitnode-binary", "", "the limitnode binary to start (default: built from the module in the working directory)")
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
	if err := o.parseLoads(*callers, *rates); err != nil {
		return o, err
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

// parseLoads reads -callers and -rates: at least one load point in all.
func (o *options) parseLoads(callers, rates string) error {
	for c := range strings.SplitSeq(callers, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			return fmt.Errorf("-callers: %q is not a positive integer", c)
		}
		o.callers = append(o.callers, n)
	}
	for r := range strings.SplitSeq(rates, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) {
			return fmt.Errorf("-rates: %q is not a positive number of calls a second", r)
		}
		o.rates = append(o.rates, v)
	}
	if len(o.rates) > 0 && o.openCallers < 1 {
		return fmt.Errorf("-open-callers must be at least 1")
	}
	if len(o.callers) == 0 && len(o.rates) == 0 {
		return fmt.Errorf("nothing to measure: give -callers or -rates")
	}
	return nil
}

// points are the load points every target is measured at: each caller
// count closed loop, then each rate open loop.
func (o options) points() []loadPoint {
	var out []loadPoint
	for _, c := range o.callers {
		out = append(out, loadPoint{callers: c})
	}
	for _, r := range o.rates {
		out = append(out, loadPoint{callers: o.openCallers, rate: r})
	}
	return out
}

func run(args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	env := newEnvironment(o)
	defer env.close()
	if o.nodeProfiles != "" {
		if err := os.MkdirAll(o.nodeProfiles, 0o755); err != nil {
			return err
		}
	}
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
	printCPU(out, results)
	printStages(out, results)
	safe := envoySafeRates(results)
	printEnvoySafe(out, safe)

	var failover *failoverResult
	if o.failover > 0 {
		f, err := env.measureFailover(o.failover)
		if err != nil {
			return fmt.Errorf("failover: %w", err)
		}
		failover = &f
		fmt.Fprintf(out, "\nfailover (kill the leader, time to the next decision; the nodes in process), %d runs: median %s, max %s\n", len(f.Runs), f.Median, f.Max)
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
		data, err := json.MarshalIndent(map[string]any{"results": results, "rounds": all, "envoy_safe_rates": safe, "failover": failover, "state": state, "options": o.describe()}, "", "  ")
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
			for _, p := range o.points() {
				r := measure(context.Background(), tgt, p, o)
				r.Round = round
				all = append(all, r)
				fmt.Fprintf(os.Stderr, "round %d  %-16s %4d callers %-12s %10.0f decisions/s  p50 %.3fms  p99 %.3fms  errors %d  unsent %d%s%s\n",
					round, r.Target, r.Callers, p, r.DecisionsPerSec, r.P50MS, r.P99MS, r.Errors, r.Unsent, r.mix(), r.busiest())
			}
			if s, ok := tgt.(interface{ stop() }); ok {
				s.stop()
			}
		}
	}
	return all, nil
}

// inProcessOnly are the network targets whose cluster needs what the
// binary has no flag for, and what.
var inProcessOnly = map[string]string{
	"https":             "testcluster's certificates and tokens",
	"grpc-secure":       "testcluster's certificates and tokens",
	"http-nostats":      "cluster.Config.NoStats",
	"http-flood-nofast": "cluster.Config.NoFastDenials",
	"http-snapshotting": "snapshots started through the Go API",
}

// unavailable says why the target called name cannot run with these
// options on this machine (lookPath finds programs), or "" when it can:
// the Redis and erl targets need redis-server, the erl targets a binary,
// and some targets -in-process.
func unavailable(name string, o options, lookPath func(string) (string, error)) string {
	if why, ok := inProcessOnly[name]; ok && !o.inProcess {
		return "it runs only with -in-process (its cluster needs " + why + ")"
	}
	erl := strings.HasPrefix(name, "erl")
	if erl && o.erlBinary == "" {
		return "-erl-binary is not set"
	}
	if erl || strings.HasPrefix(name, "redis") {
		if _, err := lookPath(o.redisServer); err != nil {
			return fmt.Sprintf("redis-server %q is not found (give its path with -redis-server)", o.redisServer)
		}
	}
	return ""
}

func (o options) describe() map[string]any {
	servers := "the cluster targets' nodes as three processes of the limitnode binary"
	if o.inProcess {
		servers = "the cluster targets' nodes inside limitbench (-in-process)"
	}
	return map[string]any{"duration": o.duration.String(), "warmup": o.warmup.String(), "closed_loop_callers": o.callers,
		"open_loop_rates": o.rates, "open_loop_callers": o.openCallers, "servers": servers,
		"keys": o.keys, "batch": o.batch, "no_sync": o.noSync, "via": o.via}
}
