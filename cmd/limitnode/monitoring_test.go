package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/rls"
	"github.com/limitnode/limitnode/testcluster"
	"go.yaml.in/yaml/v3"
)

// metricName finds the metric names in a PromQL expression.
var metricName = regexp.MustCompile(`\blimitnode_[a-z0-9_]+`)

// monitoringExprs returns every PromQL expression of the Grafana dashboard
// and the Prometheus alerts, by where it is.
func monitoringExprs(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	data, err := os.ReadFile("../../deploy/grafana/limitnode.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			exprs["dashboard panel "+p.Title+" #"+string(rune('A'+i))] = tg.Expr
		}
	}
	data, err = os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				For         string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatalf("the alerts: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %q lacks a name, a severity or a summary", r.Alert)
			}
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			}
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("only %d expressions found", len(exprs))
	}
	return exprs
}

// scrape returns the metric names a node's /metrics exposes.
func scrape(t *testing.T, n *testcluster.Node, names map[string]bool) {
	t.Helper()
	resp, err := testcluster.HTTPClient().Get(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		names[name] = true
	}
}

// TestDashboardAndAlertsNameRealMetrics drives every kind of traffic
// through a 3-node cluster (HTTP and gRPC, through a follower, allowed and
// denied, a snapshot), scrapes every node, and requires every metric the
// Grafana dashboard and the alerting rules name to be among those exposed.
func TestDashboardAndAlertsNameRealMetrics(t *testing.T) {
	t.Parallel()
	exprs := monitoringExprs(t)
	c := testcluster.Start(t, 3)
	leader, follower := c.WaitLeader(), c.Followers()[0]
	ctx := context.Background()
	if err := leader.Node().PutPolicy(ctx, contract.Policy{Name: "api", Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 2, Period: time.Hour, Burst: 2}}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		resp, err := testcluster.HTTPClient().Post(follower.URL()+"/v1/allow", "application/json", strings.NewReader(`{"policy":"api","key":"k"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	conf, perr := rls.Parse([]byte("domain: edge\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 1, name: per-client, algorithm: token_bucket}\n"))
	if perr != nil {
		t.Fatal(perr)
	}
	if err := leader.Node().PutRLSConfig(ctx, conf); err != nil {
		t.Fatal(err)
	}
	envoy := ratelimitv3.NewRateLimitServiceClient(follower.DialGRPC())
	for range 2 {
		if _, err := envoy.ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitcommon.RateLimitDescriptor{{
			Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: "client", Value: "c"}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := follower.Node().Snapshot(); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	deadline := time.Now().Add(testcluster.WaitTimeout)
	for {
		clear(names)
		for _, n := range c.Nodes {
			scrape(t, n, names)
		}
		var missing []string
		for where, expr := range exprs {
			for _, name := range metricName.FindAllString(expr, -1) {
				if !names[name] {
					missing = append(missing, where+": "+name)
				}
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			slices.Sort(missing)
			t.Fatalf("the monitoring files name metrics no node exposes:\n%s", strings.Join(missing, "\n"))
		}
		time.Sleep(100 * time.Millisecond) // the leader's health round fills the member metrics each second
	}
}

// alertTests is what the test reads of deploy/prometheus/alerts_test.yml.
type alertTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string
		AlertRuleTest []struct {
			Alertname string
			EvalTime  string `yaml:"eval_time"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	}
}

// TestAlertRulesPassPromtool runs promtool's check and its unit tests of
// the alerting rules, and requires those tests to see every alert fire and
// clear again afterwards.
func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	promtool := testenv.NeedProgram(t, "promtool")
	const dir = "../../deploy/prometheus"
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "alerts_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests alertTests
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatalf("alerts_test.yml: %v", err)
	}
	if !slices.Equal(tests.RuleFiles, []string{"alerts.yml"}) {
		t.Fatalf("alerts_test.yml tests %q, not alerts.yml", tests.RuleFiles)
	}
	// fired[name] is when the alert was first expected to fire; cleared
	// whether a later evaluation expects it gone.
	fired, cleared := map[string]time.Duration{}, map[string]bool{}
	for _, test := range tests.Tests {
		for _, r := range test.AlertRuleTest {
			at, err := time.ParseDuration(r.EvalTime)
			if err != nil {
				t.Fatalf("%s: eval_time %q: %v", test.Name, r.EvalTime, err)
			}
			first, ok := fired[r.Alertname]
			switch {
			case len(r.ExpAlerts) > 0 && !ok:
				fired[r.Alertname] = at
			case len(r.ExpAlerts) == 0 && ok && at > first:
				cleared[r.Alertname] = true
			}
		}
	}
	for where := range monitoringExprs(t) {
		name, ok := strings.CutPrefix(where, "alert ")
		if !ok {
			continue
		}
		if _, ok := fired[name]; !ok || !cleared[name] {
			t.Errorf("alerts_test.yml does not see %s fire and then clear", name)
		}
	}
}
