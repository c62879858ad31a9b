package main

import (
	"strings"
	"testing"
)

func TestStageMeansAreTheWindowsObservations(t *testing.T) {
	page := func(count, sum, under1ms, under5ms string) string {
		return `# HELP limitnode_forward_seconds x
# TYPE limitnode_forward_seconds histogram
limitnode_forward_seconds_bucket{le="0.001"} ` + under1ms + `
limitnode_forward_seconds_bucket{le="0.005"} ` + under5ms + `
limitnode_forward_seconds_bucket{le="+Inf"} ` + count + `
limitnode_forward_seconds_sum ` + sum + `
limitnode_forward_seconds_count ` + count + `
# TYPE limitnode_batch_wait_seconds histogram
limitnode_batch_wait_seconds_bucket{batcher="leader",le="0.001"} 100
limitnode_batch_wait_seconds_sum{batcher="leader"} 0.5
limitnode_batch_wait_seconds_count{batcher="leader"} 100
# TYPE limitnode_fast_denials_total counter
limitnode_fast_denials_total 7
# TYPE limitnode_http_request_duration_seconds histogram
limitnode_http_request_duration_seconds_sum{route="/metrics"} ` + sum + `
limitnode_http_request_duration_seconds_count{route="/metrics"} ` + count + `
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds_sum 1
`
	}
	before, err := readHistograms(strings.NewReader(page("10", "0.02", "10", "10")))
	if err != nil {
		t.Fatal(err)
	}
	if h := before[`batch_wait{batcher="leader"}`]; h == nil || h.count != 100 || h.buckets[0.001] != 100 {
		t.Fatalf("batch_wait %+v: a labelled bucket was not read into its histogram", h)
	}
	// Of the window's 20 observations, 19 took at most 1 ms and one up to
	// 5 ms: the 99th percentile is in the 5 ms bucket.
	after, err := readHistograms(strings.NewReader(page("30", "0.08", "29", "30")))
	if err != nil {
		t.Fatal(err)
	}
	got := stagesBetween([]metricsNode{{name: "n1"}}, []histogramTotals{before}, []histogramTotals{after})
	if len(got) != 1 {
		t.Fatalf("stages %+v: want only the forward, the one stage of a decision the window observed", got)
	}
	if s := got[0]; s.Stage != "forward" || s.Count != 20 || s.MeanMS < 2.999 || s.MeanMS > 3.001 || s.P99UpToMS != 5 {
		t.Fatalf("stage %+v: want forward, 20 observations of 3 ms on average, p99 up to 5 ms", s)
	}
	const typed = "# TYPE limitnode_forward_seconds histogram\n"
	for _, bad := range []string{typed + "limitnode_forward_seconds_sum x\n", typed + `limitnode_forward_seconds_bucket{le="x"} 1` + "\n"} {
		if _, err := readHistograms(strings.NewReader(bad)); err == nil {
			t.Errorf("%q was read", bad)
		}
	}
}

func TestATargetOfAnotherServiceHasNoNodes(t *testing.T) {
	if nodes := metricsNodesOf(nil); nodes != nil {
		t.Fatalf("the reference's target has nodes %v", nodes)
	}
}

func TestProfileNamesAreFileNames(t *testing.T) {
	tests := []struct {
		target string
		p      loadPoint
		node   string
		want   string
	}{
		{"grpc", loadPoint{callers: 64}, "n1 (leader)", "grpc-closed-64-n1__leader_.pprof"},
		{"grpc-flood", loadPoint{callers: 256, rate: 500}, "n2", "grpc-flood-open_500_s-256-n2.pprof"},
	}
	for _, tt := range tests {
		if got := profileName(tt.target, tt.p, tt.node); got != tt.want {
			t.Errorf("profileName(%q, %v, %q) = %q, want %q", tt.target, tt.p, tt.node, got, tt.want)
		}
	}
}
