package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr bool
	}{
		{"the defaults", nil, false},
		{"open loop on a hot key", []string{"-rates", "5000", "-keys", "hot", "-callers", "8"}, false},
		{"a bad caller count", []string{"-callers", "0"}, true},
		{"a bad key mode", []string{"-keys", "some"}, true},
		{"three rounds", []string{"-rounds", "3"}, false},
		{"no rounds", []string{"-rounds", "0"}, true},
		{"the reference's binary", []string{"-erl-binary", "/opt/erl", "-targets", "erl,grpc"}, false},
		{"an open-loop sweep beside closed loop", []string{"-rates", "500,1000,2000", "-open-callers", "256", "-callers", "64"}, false},
		{"an open-loop sweep alone", []string{"-rates", "500", "-callers", ""}, false},
		{"nothing to measure", []string{"-callers", ""}, true},
		{"a rate of zero", []string{"-rates", "0"}, true},
		{"a rate that is not a number", []string{"-rates", "fast"}, true},
		{"no open-loop callers", []string{"-rates", "100", "-open-callers", "0"}, true},
	}
	for _, tt := range tests {
		if _, err := parse(tt.args); (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v", tt.name, err)
		}
	}
	o, err := parse([]string{"-erl-binary", "/opt/erl"})
	if err != nil || o.erlBinary != "/opt/erl" {
		t.Fatalf("-erl-binary: %q, %v", o.erlBinary, err)
	}
	o, err = parse([]string{"-callers", "64", "-rates", "500,1000", "-open-callers", "256"})
	want := []loadPoint{{callers: 64}, {callers: 256, rate: 500}, {callers: 256, rate: 1000}}
	if err != nil || !slices.Equal(o.points(), want) {
		t.Fatalf("points %v, %v; want %v", o.points(), err, want)
	}
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	found := func(string) (string, error) { return "/usr/bin/redis-server", nil }
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	withERL := options{erlBinary: "/opt/erl"}
	tests := []struct {
		name     string
		target   string
		opts     options
		lookPath func(string) (string, error)
		want     string
	}{
		{"a limitnode target always runs", "grpc-flood", options{}, missing, ""},
		{"redis runs with redis-server", "redis", options{}, found, ""},
		{"redis needs redis-server", "redis-flood", options{redisServer: "redis-server"}, missing, `redis-server "redis-server" is not found (give its path with -redis-server)`},
		{"erl needs -erl-binary", "erl", options{}, found, "-erl-binary is not set"},
		{"erl needs redis-server too", "erl-flood-cache", withERL, missing, `redis-server "" is not found (give its path with -redis-server)`},
		{"erl runs with both", "erl-cache", withERL, found, ""},
		{"https needs -in-process", "https", options{}, found, "it runs only with -in-process (its cluster needs testcluster's certificates and tokens)"},
		{"https runs in process", "https", options{inProcess: true}, found, ""},
		{"http-snapshotting needs -in-process", "http-snapshotting", options{}, found, "it runs only with -in-process (its cluster needs snapshots started through the Go API)"},
		{"the embedded API runs in process anyway", "embedded", options{}, found, ""},
	}
	for _, tt := range tests {
		if got := unavailable(tt.target, tt.opts, tt.lookPath); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestRatiosToTheReferenceUnderTheSameLoad checks the × erl column: a
// flood against erl-flood, anything else against erl, caller count by
// caller count.
func TestRatiosToTheReferenceUnderTheSameLoad(t *testing.T) {
	t.Parallel()
	results := []result{
		{Target: "erl", Callers: 1, DecisionsPerSec: 100},
		{Target: "erl", Callers: 64, DecisionsPerSec: 1000},
		{Target: "erl-flood", Callers: 64, DecisionsPerSec: 2000},
		{Target: "erl-flood-cache", Callers: 64, DecisionsPerSec: 3000},
		{Target: "erl-cache", Callers: 64, DecisionsPerSec: 1500},
		{Target: "grpc", Callers: 1, DecisionsPerSec: 50},
		{Target: "grpc", Callers: 64, DecisionsPerSec: 500},
		{Target: "grpc-flood", Callers: 64, DecisionsPerSec: 1000},
		{Target: "http-flood", Callers: 1, DecisionsPerSec: 10},
	}
	addRatios(results)
	want := []float64{1, 1, 1, 1.5, 1.5, 0.5, 0.5, 0.5, 0}
	for i, r := range results {
		if r.VsERL != want[i] {
			t.Errorf("%s at %d callers: × erl %v, want %v", r.Target, r.Callers, r.VsERL, want[i])
		}
	}
}

// TestRunSkipsTheReferenceWithoutItsBinary runs the tool with erl targets
// and no -erl-binary: they are skipped, the others measured.
func TestRunSkipsTheReferenceWithoutItsBinary(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "out.json")
	var table strings.Builder
	if err := run([]string{"-targets", "trivial,erl,erl-flood", "-callers", "1", "-duration", "100ms", "-warmup", "10ms", "-rounds", "2", "-json", path}, &table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"skipping erl: -erl-binary is not set", "skipping erl-flood: -erl-binary is not set"} {
		if strings.Count(table.String(), want+"\n") != 1 {
			t.Errorf("table lacks %q once:\n%s", want, table.String())
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Results []result }
	if err := json.Unmarshal(data, &out); err != nil || len(out.Results) != 1 || out.Results[0].Target != "trivial" {
		t.Fatalf("results %s, %v", data, err)
	}
}

// TestRunMeasuresAndReports runs the tool briefly on the trivial handler
// and a real cluster, closed and open loop, and reads its JSON.
func TestRunMeasuresAndReports(t *testing.T) {
	t.Parallel()
	// The open loop's calls are slots of a schedule, counted from the
	// warm-up's end: on a loaded machine a call can outlast a slot or
	// three, so the slots are wide and the window long enough for a few.
	for _, mode := range [][]string{{"-duration", "1s"}, {"-callers", "", "-rates", "20", "-open-callers", "2", "-duration", "1s"}} {
		path := filepath.Join(t.TempDir(), "out.json")
		args := append([]string{"-in-process", "-targets", "trivial,http-batch,embedded,http-snapshotting,grpc,grpc-multi,grpc-flood,grpc-secure,grpc-hot-shares,http-flood,client-coalesced", "-tls", "-preload", "2000", "-via", "follower", "-state-keys", "5000", "-callers", "2", "-warmup", "50ms", "-batch", "10", "-json", path}, mode...)
		var table strings.Builder
		if err := run(args, &table); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Results []result
			State   *stateResult
		}
		if err := json.Unmarshal(data, &out); err != nil || len(out.Results) != 12 {
			t.Fatalf("results %s, %v", data, err)
		}
		if out.State == nil || out.State.Keys != 5000 || out.State.HeapBytesPerKey <= 0 || out.State.RestoreSeconds <= 0 {
			t.Fatalf("state %+v", out.State)
		}
		for _, r := range out.Results {
			// A short run may see no snapshot: http-snapshotting then has
			// no latencies to report (TestSnapshotWindows covers them).
			noSamples := r.Target == "http-snapshotting" && r.Samples == 0
			// A loaded machine may time a call out now and then (an
			// election): errors are counted, a few are no failure.
			if r.Decisions == 0 || r.Errors*10 > r.Calls || (r.P50MS <= 0 && !noSamples) || r.Samples > int(r.Calls) || (r.Target != "trivial" && r.VsTrivial == 0) {
				t.Errorf("%s: %+v", r.Target, r)
			}
			if r.Target == "grpc-hot-shares" && r.Mode != "open" && r.SharedFraction == 0 {
				t.Errorf("grpc-hot-shares: no answer came from a share: %+v", r)
			}
			if r.Where != whereInProcess || len(r.CPU) != 1 || r.CPU[0].PID != os.Getpid() {
				t.Errorf("%s with -in-process: where %q, CPU %+v", r.Target, r.Where, r.CPU)
			}
		}
		if !strings.Contains(table.String(), "http-batch") || !strings.Contains(table.String(), "https") {
			t.Fatalf("table:\n%s", table.String())
		}
	}
}

func TestMedianRoundsPicksOneWholeRoundPerTarget(t *testing.T) {
	t.Parallel()
	r := func(target string, callers, round int, perSec, p99 float64) result {
		return result{Target: target, Callers: callers, Round: round, DecisionsPerSec: perSec, P99MS: p99}
	}
	open := func(r result, rate float64) result { r.Mode, r.Rate = "open", rate; return r }
	tests := []struct {
		name string
		all  []result
		want []result
	}{
		{"one round", []result{r("a", 1, 1, 10, 1)}, []result{r("a", 1, 1, 10, 1)}},
		{"three rounds", []result{
			r("a", 1, 1, 30, 3), r("b", 1, 1, 5, 9),
			r("a", 1, 2, 10, 1), r("b", 1, 2, 7, 8),
			r("a", 1, 3, 20, 2), r("b", 1, 3, 6, 7),
		}, []result{r("a", 1, 3, 20, 2), r("b", 1, 3, 6, 7)}},
		{"two rounds take the upper", []result{r("a", 64, 1, 10, 1), r("a", 64, 2, 20, 2)}, []result{r("a", 64, 2, 20, 2)}},
		{"caller counts apart", []result{r("a", 1, 1, 10, 1), r("a", 64, 1, 99, 1)}, []result{r("a", 1, 1, 10, 1), r("a", 64, 1, 99, 1)}},
		{"open loop by p99", []result{open(r("a", 256, 1, 500, 30), 500), open(r("a", 256, 2, 499, 10), 500), open(r("a", 256, 3, 498, 20), 500)},
			[]result{open(r("a", 256, 3, 498, 20), 500)}},
		{"rates apart, and apart from closed loop", []result{open(r("a", 256, 1, 500, 3), 500), open(r("a", 256, 1, 900, 9), 1000), r("a", 256, 1, 5000, 50)},
			[]result{open(r("a", 256, 1, 500, 3), 500), open(r("a", 256, 1, 900, 9), 1000), r("a", 256, 1, 5000, 50)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := medianRounds(tt.all); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestSnapshotWindows(t *testing.T) {
	t.Parallel()
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	var w snapshotWindows
	w.begin(at(100))
	w.end(at(200))
	w.begin(at(500)) // still running
	tests := []struct {
		name     string
		from, to int
		want     bool
	}{
		{"before", 0, 99, false},
		{"across the start", 50, 150, true},
		{"inside", 120, 130, true},
		{"across the end", 190, 250, true},
		{"between", 201, 499, false},
		{"during the one under way", 600, 700, true},
	}
	for _, tt := range tests {
		if got := w.overlaps(at(tt.from), at(tt.to)); got != tt.want {
			t.Errorf("%s: overlaps = %v, want %v", tt.name, got, tt.want)
		}
	}
}
