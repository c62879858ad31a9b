package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// A limitnode node reports where a decision's time goes in histograms on
// its /metrics (limitnode_*_seconds: each batcher's wait, the forward's
// round trip, the append, the commit, the apply, the API's decode and
// encode; see docs/operations.md). limitbench reads them from every node
// when the measured window opens and when it closes, and reports each
// stage's mean over the window, so that a run says which stage a missed
// target spent its time in.

// stageMean is one histogram's mean over a measured window, on one node.
type stageMean struct {
	Node string `json:"node"`
	// Stage is the histogram's name without limitnode_ and _seconds, with
	// its labels, such as `batch_wait{batcher="follower"}`.
	Stage string `json:"stage"`
	// Count is how many observations the window added; MeanMS their mean.
	Count  int64   `json:"count"`
	MeanMS float64 `json:"mean_ms"`
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

// histogramTotals is a /metrics page's histograms: count and sum by name
// with labels.
type histogramTotals map[string][2]float64

// readHistograms reads the _count and _sum lines of limitnode's latency
// histograms from a /metrics page.
func readHistograms(r io.Reader) (histogramTotals, error) {
	out := histogramTotals{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "limitnode_") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		var slot int
		switch {
		case strings.Contains(name, "_seconds_count"):
			slot = 0
		case strings.Contains(name, "_seconds_sum"):
			slot = 1
		default:
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		stage := strings.NewReplacer("limitnode_", "", "_seconds_count", "", "_seconds_sum", "").Replace(name)
		t := out[stage]
		t[slot] = v
		out[stage] = t
	}
	return out, sc.Err()
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
			count := int64(a[0] - b[0])
			if count <= 0 {
				continue
			}
			out = append(out, stageMean{Node: n.name, Stage: stage, Count: count, MeanMS: (a[1] - b[1]) * 1000 / float64(count)})
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
	fmt.Fprintln(out, "\nStages (the nodes' limitnode_*_seconds histograms over the measured window): mean ms (observations)")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "target\tload\tcallers\tnode\tstages\t")
	for _, r := range results {
		byNode := map[string][]string{}
		var order []string
		for _, s := range r.Stages {
			if byNode[s.Node] == nil {
				order = append(order, s.Node)
			}
			byNode[s.Node] = append(byNode[s.Node], fmt.Sprintf("%s %.2f (%d)", s.Stage, s.MeanMS, s.Count))
		}
		for _, node := range order {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t\n", r.Target, r.point(), r.Callers, node, strings.Join(byNode[node], "; "))
		}
	}
	w.Flush()
}
