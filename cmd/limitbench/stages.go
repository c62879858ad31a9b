package main

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A limitnode node reports where a decision's time goes in histograms on
// its /metrics (limitnode_*_seconds: each batcher's wait, the forward's
// round trip, the append, the commit, the apply, the API's decode and
// encode; see docs/operations.md). limitbench reads them from every node
// when the measured window opens and when it closes, and reports each
// stage's mean over the window, so that a run says which stage a missed
// target spent its time in, and the bucket its 99th percentile falls in,
// so that a tail shows in the stage it comes from.

// stageMean is one histogram's mean over a measured window, on one node.
type stageMean struct {
	Node string `json:"node"`
	// Stage is the histogram's name without limitnode_ and _seconds, with
	// its labels, such as `batch_wait{batcher="follower"}`.
	Stage string `json:"stage"`
	// Count is how many observations the window added; MeanMS their mean.
	Count  int64   `json:"count"`
	MeanMS float64 `json:"mean_ms"`
	// P99UpToMS is the upper bound of the bucket the window's 99th
	// percentile fell in (the histograms' buckets are coarse: 1, 2.5, 5,
	// 10 ms...); 0 when it fell past the last bound.
	P99UpToMS float64 `json:"p99_up_to_ms"`
}

// metricsNode is a node whose /metrics limitbench reads.
type metricsNode struct{ name, url string }

// staged is a target whose servers report stage histograms.
type staged interface{ metricsNodes() []metricsNode }

// metricsNodesOf names c's members as servers() does, with their /metrics.
func metricsNodesOf(c netCluster) []metricsNode {
	if c == nil { // a target of another service (the reference's)
		return nil
	}
	members := c.members()
	names := c.servers()
	if len(names) != len(members) {
		names = nil
	}
	out := make([]metricsNode, len(members))
	for i, m := range members {
		name := fmt.Sprintf("node %d", i+1)
		if names != nil {
			name = names[i].Name
		}
		out[i] = metricsNode{name: name, url: m.URL() + "/metrics"}
	}
	return out
}

// histogram is one latency histogram as a /metrics page gives it: its
// count, its sum in seconds, and the cumulative count of each bucket by
// its upper bound in seconds.
type histogram struct {
	count, sum float64
	buckets    map[float64]float64
}

// histogramTotals is a /metrics page's histograms by name with labels.
type histogramTotals map[string]*histogram

// readHistograms reads limitnode's latency histograms (the histograms
// named limitnode_*_seconds) from a /metrics page in Prometheus's text
// format, each under its name without limitnode_ and _seconds and with
// its labels, such as `batch_wait{batcher="follower"}`.
func readHistograms(r io.Reader) (histogramTotals, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("read a metrics page: %w", err)
	}
	out := histogramTotals{}
	for name, family := range families {
		stage, limitnodes := strings.CutPrefix(name, "limitnode_")
		stage, seconds := strings.CutSuffix(stage, "_seconds")
		if !limitnodes || !seconds || family.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range family.GetMetric() {
			h := m.GetHistogram()
			read := &histogram{count: float64(h.GetSampleCount()), sum: h.GetSampleSum(), buckets: map[float64]float64{}}
			for _, b := range h.GetBucket() {
				read.buckets[b.GetUpperBound()] = float64(b.GetCumulativeCount())
			}
			out[stage+labelsOf(m)] = read
		}
	}
	return out, nil
}

// labelsOf writes m's labels as the metrics page does: {name="value",...},
// or "" when it has none.
func labelsOf(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	pairs := make([]string, len(m.GetLabel()))
	for i, l := range m.GetLabel() {
		pairs[i] = fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	return "{" + strings.Join(pairs, ",") + "}"
}

// p99UpTo is the upper bound, in seconds, of the bucket the 99th
// percentile of the observations from before to after fell in; 0 when it
// fell past the last finite bound.
func p99UpTo(before, after *histogram) float64 {
	bounds := make([]float64, 0, len(after.buckets))
	for b := range after.buckets {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	total := after.count - before.count
	for _, b := range bounds {
		if math.IsInf(b, 1) {
			break
		}
		if after.buckets[b]-before.buckets[b] >= 0.99*total {
			return b
		}
	}
	return 0
}

// scrapeHistograms reads every node's histograms; a node that cannot be
// read gives nil.
func scrapeHistograms(client *http.Client, nodes []metricsNode) []histogramTotals {
	out := make([]histogramTotals, len(nodes))
	for i, n := range nodes {
		resp, err := client.Get(n.url)
		if err != nil {
			continue
		}
		if resp.StatusCode == http.StatusOK {
			out[i], _ = readHistograms(resp.Body)
		}
		resp.Body.Close()
	}
	return out
}

// stagesBetween is each stage's mean on each node from before to after,
// for the stages the window observed.
func stagesBetween(nodes []metricsNode, before, after []histogramTotals) []stageMean {
	var out []stageMean
	for i, n := range nodes {
		if i >= len(before) || i >= len(after) || before[i] == nil || after[i] == nil {
			continue
		}
		for stage, a := range after[i] {
			if strings.Contains(stage, `route="/metrics"`) || strings.Contains(stage, `route="/debug/pprof/"`) {
				continue // limitbench's own reads of the node
			}
			b := before[i][stage]
			if b == nil {
				b = &histogram{}
			}
			count := int64(a.count - b.count)
			if count <= 0 {
				continue
			}
			out = append(out, stageMean{Node: n.name, Stage: stage, Count: count,
				MeanMS: (a.sum - b.sum) * 1000 / float64(count), P99UpToMS: p99UpTo(b, a) * 1000})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].Stage < out[j].Stage
	})
	return out
}

// watchStages reads tgt's nodes' histograms when the measured window opens
// and returns a function that, once the run is over, puts each stage's
// mean over the window into r. Targets without nodes are left alone.
func watchStages(tgt target, from time.Time) func(r *result) {
	s, ok := tgt.(staged)
	if !ok {
		return func(*result) {}
	}
	client := &http.Client{Timeout: 5 * time.Second}
	nodes := s.metricsNodes()
	opened := make(chan []histogramTotals, 1)
	go func() {
		time.Sleep(time.Until(from))
		opened <- scrapeHistograms(client, nodes)
	}()
	return func(r *result) {
		r.Stages = stagesBetween(nodes, <-opened, scrapeHistograms(client, nodes))
	}
}

// printStages writes each result's stage means, node by node.
func printStages(out io.Writer, results []result) {
	any := false
	for _, r := range results {
		any = any || len(r.Stages) > 0
	}
	if !any {
		return
	}
	fmt.Fprintln(out, "\nStages (the nodes' limitnode_*_seconds histograms over the measured window): mean ms (observations) p99 up to the bucket's bound in ms")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "target\tload\tcallers\tnode\tstages\t")
	for _, r := range results {
		byNode := map[string][]string{}
		var order []string
		for _, s := range r.Stages {
			if byNode[s.Node] == nil {
				order = append(order, s.Node)
			}
			p99 := "past the last bucket"
			if s.P99UpToMS > 0 {
				p99 = fmt.Sprintf("≤%g", s.P99UpToMS)
			}
			byNode[s.Node] = append(byNode[s.Node], fmt.Sprintf("%s %.2f (%d) p99 %s", s.Stage, s.MeanMS, s.Count, p99))
		}
		for _, node := range order {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t\n", r.Target, r.point(), r.Callers, node, strings.Join(byNode[node], "; "))
		}
	}
	w.Flush()
}
