package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/rls"
	"github.com/limitnode/limitnode/testcluster"
	"go.yaml.in/yaml/v3"
)

// prometheusServer is a prometheus process this test started, and its
// HTTP API.
type prometheusServer struct {
	base string // http://127.0.0.1:PORT
}

// startPrometheus runs the prometheus binary scraping targets every second
// with deploy/prometheus/alerts.yml as its rules (evaluated every second),
// its storage in a temporary directory. It returns once Prometheus is ready.
func startPrometheus(t *testing.T, targets []string, scheme, token string) *prometheusServer {
	t.Helper()
	bin := testenv.NeedProgram(t, "prometheus")
	rules, err := filepath.Abs("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	job := map[string]any{
		"job_name":       "limitnode",
		"scheme":         scheme,
		"static_configs": []any{map[string]any{"targets": targets}},
	}
	if token != "" {
		job["authorization"] = map[string]any{"credentials": token}
		job["tls_config"] = map[string]any{"insecure_skip_verify": true}
	}
	config, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
		"rule_files":     []string{rules},
		"scrape_configs": []any{job},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, config, 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.SyncBuffer{}
	// Prometheus listens on a port it is given, or on one the OS picks for
	// port 0, which its log names (at info).
	cmd := exec.Command(bin, "--config.file="+configFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:0", "--log.level=info")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus said:\n%s", logs.String())
		}
	})
	var addr []string
	testenv.WaitFor(t, "Prometheus to say where it listens", func() bool {
		select {
		case <-exited:
			t.Fatalf("prometheus exited: %s", logs.String())
		default:
		}
		addr = prometheusListens.FindStringSubmatch(logs.String())
		return addr != nil
	})
	p := &prometheusServer{base: "http://" + addr[1]}
	testenv.WaitFor(t, "Prometheus to be ready", func() bool {
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// prometheusListens is the line of Prometheus's log that names the address
// it listens on.
var prometheusListens = regexp.MustCompile(`msg="Listening on" address=(127\.0\.0\.1:\d+)`)

// get calls one endpoint of Prometheus's HTTP API and decodes its data.
func (p *prometheusServer) get(t *testing.T, path string, query url.Values, data any) {
	t.Helper()
	resp, err := http.Get(p.base + path + "?" + query.Encode())
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var answer struct {
		Status string
		Error  string
		Data   json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if answer.Status != "success" {
		t.Fatalf("GET %s?%s: %s", path, query.Encode(), answer.Error)
	}
	if err := json.Unmarshal(answer.Data, data); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// sample is one series of an instant query's answer.
type sample struct {
	Metric map[string]string
	Value  [2]any // [unix time, "value"]
}

func (s sample) value() float64 {
	v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
	return v
}

// query evaluates expr now.
func (p *prometheusServer) query(t *testing.T, expr string) []sample {
	t.Helper()
	var data struct {
		ResultType string
		Result     []sample
	}
	p.get(t, "/api/v1/query", url.Values{"query": {expr}}, &data)
	if data.ResultType != "vector" {
		t.Fatalf("%s answers a %s, not an instant vector", expr, data.ResultType)
	}
	return data.Result
}

// hasNumbers reports whether some series holds a number (histogram_quantile
// of a histogram that observed nothing is NaN).
func hasNumbers(samples []sample) bool {
	return slices.ContainsFunc(samples, func(s sample) bool { return !math.IsNaN(s.value()) })
}

// driveEveryKind sends, until ctx ends, each kind of traffic the dashboard
// shows: checks allowed, near their limit and denied (through a follower,
// so forwarded, and on the leader, so answered by its fast path), a shadow
// policy's denials, and Envoy's calls over and within a metered limit.
func driveEveryKind(t *testing.T, ctx context.Context, c *testcluster.Cluster) *sync.WaitGroup {
	t.Helper()
	leader, follower := c.WaitLeader(), c.Followers()[0]
	hour := int64(time.Hour)
	for _, p := range []contract.Policy{
		{Name: "api", Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 5, Period: time.Duration(hour), Burst: 5}},
		{Name: "trial", Shadow: true, Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 1, Period: time.Duration(hour), Burst: 1}},
	} {
		if err := leader.Node().PutPolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	conf, perr := rls.Parse([]byte("domain: edge\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 1, name: per-client, algorithm: token_bucket}\n"))
	if perr != nil {
		t.Fatal(perr)
	}
	if err := leader.Node().PutRLSConfig(ctx, conf); err != nil {
		t.Fatal(err)
	}
	envoy := ratelimitv3.NewRateLimitServiceClient(follower.DialGRPC())
	var wg sync.WaitGroup
	for i, n := range []*testcluster.Node{leader, follower} {
		wg.Go(func() {
			for round := 0; ctx.Err() == nil; round++ {
				for _, body := range []string{
					fmt.Sprintf(`{"policy":"api","key":"k%d-%d"}`, i, round%50), // allowed at first, then near the limit and denied
					`{"policy":"api","key":"hot"}`,                              // denied, mostly by the fast path
					`{"policy":"trial","key":"hot"}`,                            // shadow denials
				} {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.URL()+"/v1/allow", strings.NewReader(body))
					if resp, err := testcluster.HTTPClient().Do(req); err == nil {
						resp.Body.Close()
					}
				}
				_, _ = envoy.ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitcommon.RateLimitDescriptor{{
					Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: "client", Value: strconv.Itoa(round % 3)}}}}})
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond): // a steady trickle: the machine runs other tests too
				}
			}
		})
	}
	return &wg
}

// TestDashboardAndAlertsOnARealPrometheus runs Prometheus with the alerting
// rules as shipped, scraping a 3-node cluster under every kind of traffic,
// and requires each expression of the Grafana dashboard to answer a number
// through Prometheus's query API and every rule to evaluate without error;
// then it kills two nodes, and the survivor's LimitnodeNoLeader must fire.
func TestDashboardAndAlertsOnARealPrometheus(t *testing.T) {
	t.Parallel()
	testenv.NeedProgram(t, "prometheus")
	exprs := monitoringExprs(t)
	c := testcluster.Start(t, 3)
	var targets []string
	for _, n := range c.Nodes {
		targets = append(targets, n.HTTPAddr)
	}
	scheme, token := "http", ""
	if strings.HasPrefix(c.Nodes[0].URL(), "https://") {
		scheme, token = "https", testcluster.Token(auth.RoleRead)
	}
	prom := startPrometheus(t, targets, scheme, token)
	testenv.WaitFor(t, "Prometheus to scrape every node", func() bool {
		up := prom.query(t, "up == 1")
		return len(up) == len(targets)
	})

	ctx, stopTraffic := context.WithCancel(context.Background())
	traffic := driveEveryKind(t, ctx, c)
	defer func() { stopTraffic(); traffic.Wait() }()
	// Snapshots between two scrapes, so that their histogram has a rate.
	for _, n := range c.Nodes {
		if err := n.Node().Snapshot(); err != nil {
			t.Fatal(err)
		}
	}

	var dashboard []string
	for where := range exprs {
		if strings.HasPrefix(where, "dashboard ") {
			dashboard = append(dashboard, where)
		}
	}
	slices.Sort(dashboard)
	pending := slices.Clone(dashboard)
	deadline := time.Now().Add(testcluster.WaitTimeout)
	for len(pending) > 0 {
		pending = slices.DeleteFunc(pending, func(where string) bool { return hasNumbers(prom.query(t, exprs[where])) })
		if len(pending) > 0 && time.Now().After(deadline) {
			var report []string
			for _, where := range pending {
				report = append(report, fmt.Sprintf("%s: %s answers %v", where, exprs[where], prom.query(t, exprs[where])))
			}
			t.Fatalf("dashboard expressions without data after %s:\n%s", testcluster.WaitTimeout, strings.Join(report, "\n"))
		}
		time.Sleep(500 * time.Millisecond) // a scrape each second
	}
	checkRulesHealthy(t, prom, exprs)
	stopTraffic()
	traffic.Wait()

	// Two of three gone: the survivor has no quorum and no leader.
	leader := c.WaitLeader()
	survivor := c.Followers()[0]
	for _, n := range c.Nodes {
		if n != survivor {
			n.Kill()
		}
	}
	t.Logf("killed %s (the leader) and the other follower; %s survives", leader.ID, survivor.ID)
	waitForAlert(t, prom, "LimitnodeNoLeader", map[string]string{"instance": survivor.HTTPAddr, "severity": "critical"}, time.Minute)
}

// checkRulesHealthy requires Prometheus to have loaded every alert of
// alerts.yml and to evaluate each without error.
func checkRulesHealthy(t *testing.T, prom *prometheusServer, exprs map[string]string) {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []struct {
				Name, Health, LastError string
			}
		}
	}
	testenv.WaitFor(t, "every rule to be evaluated", func() bool {
		prom.get(t, "/api/v1/rules", url.Values{}, &data)
		for _, g := range data.Groups {
			for _, r := range g.Rules {
				if r.Health == "unknown" {
					return false
				}
			}
		}
		return len(data.Groups) > 0
	})
	loaded := map[string]bool{}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			loaded[r.Name] = true
			if r.Health != "ok" {
				t.Errorf("alert %s: health %s: %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	for where := range exprs {
		if name, ok := strings.CutPrefix(where, "alert "); ok && !loaded[name] {
			t.Errorf("Prometheus did not load alert %s", name)
		}
	}
}

// waitForAlert waits until the alert named name with labels fires.
func waitForAlert(t *testing.T, prom *prometheusServer, name string, labels map[string]string, within time.Duration) {
	t.Helper()
	var data struct {
		Alerts []struct {
			Labels map[string]string
			State  string
		}
	}
	states := ""
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		prom.get(t, "/api/v1/alerts", url.Values{}, &data)
		var seen []string
		for _, a := range data.Alerts {
			seen = append(seen, fmt.Sprintf("%s %v", a.State, a.Labels))
			match := a.Labels["alertname"] == name
			for k, v := range labels {
				match = match && a.Labels[k] == v
			}
			if match && a.State == "firing" {
				return
			}
		}
		states = strings.Join(seen, "; ")
	}
	t.Fatalf("alert %s %v did not fire within %s; alerts: %s", name, labels, within, states)
}
