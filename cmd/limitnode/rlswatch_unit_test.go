package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/rls"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeRLSCluster is a cluster of one map of domains, leading or not, whose
// puts fail while failPuts is set.
type fakeRLSCluster struct {
	mu       sync.Mutex
	leading  bool
	domains  map[string]rls.Config
	puts     []string // domain@actor, in order
	failPuts error
}

func (f *fakeRLSCluster) IsLeader() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.leading }

func (f *fakeRLSCluster) AppliedRLSConfig(domain string) (rls.Config, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.domains[domain]
	return c, ok
}

func (f *fakeRLSCluster) RLSConfig(_ context.Context, domain string) (rls.Config, bool, error) {
	c, ok := f.AppliedRLSConfig(domain)
	return c, ok, nil
}

func (f *fakeRLSCluster) PutRLSConfig(ctx context.Context, c rls.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failPuts != nil {
		return f.failPuts
	}
	f.domains[c.Domain] = c
	f.puts = append(f.puts, c.Domain+"@"+contract.ActorOf(ctx))
	return nil
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// mustParse is the configuration of text.
func mustParse(t *testing.T, text string) rls.Config {
	t.Helper()
	c, err := rls.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// apiPut marks a step of TestTheRLSWatch that puts a configuration through
// the API.
const apiPut = "api put:"

// stepDown is a step of TestTheRLSWatch after which the node no longer
// leads.
const stepDown = "step down"

// TestTheRLSWatch drives the watch one read at a time, over a file
// written in place, against a cluster that leads or follows.
func TestTheRLSWatch(t *testing.T) {
	const loginConfig = "domain: login\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
	cases := []struct {
		name string
		// steps are run in order: a content to write ("" writes nothing;
		// apiPut and a content puts it in the cluster, as limitnode rls put
		// does), then one read.
		steps     []string
		leading   bool
		leadsFrom int               // the step from which the node leads, when not leading from the start (0: never)
		cluster   map[string]string // the cluster's domains at the start
		failPuts  error
		wantTries int // failed puts, when failPuts is set
		wantPuts  []string
		wantLimit uint32 // edge's requests_per_unit in the cluster at the end; 0 for none
		wantLogs  []string
		notLogs   []string
		invalid   float64 // limitnode_rls_config_reloads_total{result="invalid"}
	}{{
		name:      "the leader puts the file's domain the cluster lacks, once",
		steps:     []string{edgeConfig(2), ""},
		leading:   true,
		wantPuts:  []string{"edge@rls-config"},
		wantLimit: 2,
		wantLogs:  []string{`msg="read -rls-config"`, "had_one=false"},
	}, {
		name:      "a follower reads the file and puts nothing",
		steps:     []string{edgeConfig(2), edgeConfig(3), ""},
		cluster:   map[string]string{"edge": edgeConfig(1)},
		wantLimit: 1,
	}, {
		name:      "a follower that comes to lead puts its file's configuration",
		steps:     []string{edgeConfig(2), edgeConfig(3), "", "", ""},
		leadsFrom: 4,
		cluster:   map[string]string{"edge": edgeConfig(2)},
		wantPuts:  []string{"edge@rls-config"},
		wantLimit: 3,
	}, {
		name:      "a leader that steps down and comes to lead again puts what was changed meanwhile",
		steps:     []string{edgeConfig(2), stepDown, apiPut + edgeConfig(7), "", "", ""},
		leading:   true,
		leadsFrom: 5,
		cluster:   map[string]string{"edge": edgeConfig(1)},
		wantPuts:  []string{"edge@rls-config", "edge@api", "edge@rls-config"},
		wantLimit: 2,
	}, {
		name:      "the leader puts nothing while the cluster holds the file's configuration",
		steps:     []string{edgeConfig(2), "", ""},
		leading:   true,
		cluster:   map[string]string{"edge": edgeConfig(2)},
		wantLimit: 2,
	}, {
		name:      "a change is taken once two reads agree, never a half-written file",
		steps:     []string{edgeConfig(2), edgeConfig(3)[:30], edgeConfig(3), ""},
		leading:   true,
		cluster:   map[string]string{"edge": edgeConfig(2)},
		wantPuts:  []string{"edge@rls-config"},
		wantLimit: 3,
		notLogs:   []string{"invalid"},
	}, {
		name:      "an invalid file is logged with its line and changes nothing",
		steps:     []string{edgeConfig(2), brokenEdgeConfig, "", ""},
		leading:   true,
		cluster:   map[string]string{"edge": edgeConfig(2)},
		wantLimit: 2,
		wantLogs:  []string{`level=ERROR msg="-rls-config is invalid: nothing changes`, `descriptors[0].rate_limit.unit: line 5: unknown unit \"fortnight\"`},
		invalid:   1,
	}, {
		name:      "a change through the API holds until the file changes",
		steps:     []string{edgeConfig(2), apiPut + edgeConfig(7), "", "", edgeConfig(3), ""},
		leading:   true,
		cluster:   map[string]string{"edge": edgeConfig(2)},
		wantPuts:  []string{"edge@api", "edge@rls-config"},
		wantLimit: 3,
	}, {
		name:      "a node that leads from its start puts what differs from its file, and keeps it through an invalid file",
		steps:     []string{edgeConfig(2), brokenEdgeConfig, ""},
		leading:   true,
		cluster:   map[string]string{"edge": edgeConfig(7)},
		wantPuts:  []string{"edge@rls-config"},
		wantLimit: 2,
		invalid:   1,
	}, {
		name:      "a failing put is logged once and tried again",
		steps:     []string{edgeConfig(2), "", ""},
		leading:   true,
		failPuts:  contract.ErrNoLeader,
		wantLogs:  []string{`msg="putting a domain of -rls-config through the log failed; trying again" rls_config=`},
		wantTries: 3,
	}, {
		name:      "a put the cluster refuses is not tried again until the file changes",
		steps:     []string{edgeConfig(2), "", "", edgeConfig(3), "", ""},
		leading:   true,
		failPuts:  contract.Invalid("domain", "the cluster holds at most 1000 rate limit service domains"),
		wantLogs:  []string{`level=ERROR msg="the cluster refused a domain of -rls-config; it is tried again when the file changes or another node comes to lead"`},
		wantTries: 2,
	}, {
		name:      "a domain gone from the file stays in the cluster, with a warning",
		steps:     []string{edgeConfig(2), loginConfig, ""},
		leading:   true,
		cluster:   map[string]string{"edge": edgeConfig(2)},
		wantPuts:  []string{"login@rls-config"},
		wantLimit: 2,
		wantLogs:  []string{`level=WARN msg="a domain is no longer in -rls-config; the cluster keeps it until limitnode rls delete removes it" rls_config=`},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "edge.yaml")
			cluster := &fakeRLSCluster{leading: tc.leading, domains: map[string]rls.Config{}, failPuts: tc.failPuts}
			for domain, text := range tc.cluster {
				cluster.domains[domain] = mustParse(t, text)
			}
			var logs testenv.SyncBuffer
			w := newRLSWatch(file, cluster, slog.New(slog.NewTextHandler(&logs, nil)))
			for step, content := range tc.steps {
				if step+1 == tc.leadsFrom {
					cluster.mu.Lock()
					cluster.leading = true
					cluster.mu.Unlock()
				}
				switch api, ok := strings.CutPrefix(content, apiPut); {
				case content == stepDown:
					cluster.mu.Lock()
					cluster.leading = false
					cluster.mu.Unlock()
				case ok:
					if err := cluster.PutRLSConfig(contract.WithActor(context.Background(), "api"), mustParse(t, api)); err != nil {
						t.Fatal(err)
					}
				case content != "":
					writeFile(t, file, content)
				}
				w.poll(context.Background())
			}
			if !slices.Equal(cluster.puts, tc.wantPuts) {
				t.Errorf("puts %q, want %q", cluster.puts, tc.wantPuts)
			}
			got := uint32(0)
			if c, ok := cluster.domains["edge"]; ok {
				got = c.Descriptors[0].RateLimit.RequestsPerUnit
			}
			if got != tc.wantLimit {
				t.Errorf("edge at %d in the cluster, want %d", got, tc.wantLimit)
			}
			out := logs.String()
			for _, want := range tc.wantLogs {
				if !strings.Contains(out, want) {
					t.Errorf("the log lacks %q:\n%s", want, out)
				}
			}
			for _, not := range tc.notLogs {
				if strings.Contains(out, not) {
					t.Errorf("the log holds %q:\n%s", not, out)
				}
			}
			if tc.failPuts == contract.ErrNoLeader && strings.Count(out, "failed; trying again") != 1 {
				t.Errorf("a put failing alike %d times logged %d times, want once:\n%s", tc.wantTries, strings.Count(out, "failed; trying again"), out)
			}
			if n := testutil.ToFloat64(w.metrics.applied.WithLabelValues("error")); n != float64(tc.wantTries) {
				t.Errorf("%v failed puts, want %d", n, tc.wantTries)
			}
			if n := testutil.ToFloat64(w.metrics.reloads.WithLabelValues("invalid")); n != tc.invalid {
				t.Errorf("%v invalid reloads counted, want %v", n, tc.invalid)
			}
		})
	}
}

// TestReadRLSFiles: what -rls-config reads, a file or a directory, laid
// out by hand or as a mounted ConfigMap.
func TestReadRLSFiles(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		layout  func(t *testing.T, dir string) string // returns -rls-config
		want    []string                              // the domains read
		wantErr string
	}{{
		name: "one file",
		layout: func(t *testing.T, dir string) string {
			writeFile(t, dir+"/edge.yaml", edgeConfig(1))
			return dir + "/edge.yaml"
		},
		want: []string{"edge"},
	}, {
		name: "a directory: regular files and symbolic links to them, in name order; dotfiles and directories skipped",
		layout: func(t *testing.T, dir string) string {
			writeFile(t, dir+"/b.yaml", edgeConfig(1))
			elsewhere := filepath.Join(t.TempDir(), "api.yaml")
			writeFile(t, elsewhere, "domain: api\n")
			mustSymlink(t, elsewhere, dir+"/a.yaml")
			writeFile(t, dir+"/.b.yaml.swp", "not yaml: [")
			if err := os.Mkdir(dir+"/sub", 0o700); err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir+"/sub/c.yaml", "domain: sub\n")
			return dir
		},
		want: []string{"api", "edge"},
	}, {
		name: "a mounted ConfigMap: its keys, not its ..data versions",
		layout: func(t *testing.T, dir string) string {
			m := &configMapMount{t: t, dir: dir}
			m.update("edge.yaml", edgeConfig(1))
			m.update("edge.yaml", edgeConfig(2))
			return dir
		},
		want: []string{"edge"},
	}, {
		name: "one key of a mounted ConfigMap, through its link",
		layout: func(t *testing.T, dir string) string {
			m := &configMapMount{t: t, dir: dir}
			m.update("edge.yaml", edgeConfig(1))
			return dir + "/edge.yaml"
		},
		want: []string{"edge"},
	}, {
		name: "two files of one domain",
		layout: func(t *testing.T, dir string) string {
			writeFile(t, dir+"/a.yaml", edgeConfig(1))
			writeFile(t, dir+"/b.yaml", edgeConfig(2))
			return dir
		},
		wantErr: `b.yaml: domain "edge" is configured in`,
	}, {
		name: "a broken link",
		layout: func(t *testing.T, dir string) string {
			mustSymlink(t, "nowhere", dir+"/a.yaml")
			return dir
		},
		wantErr: "no such file or directory",
	}, {
		name:    "nothing there",
		layout:  func(t *testing.T, dir string) string { return dir + "/missing.yaml" },
		wantErr: "no such file or directory",
	}, {
		name: "a file too large",
		layout: func(t *testing.T, dir string) string {
			writeFile(t, dir+"/big.yaml", "# "+strings.Repeat("x", rls.MaxConfigBytes)+"\n")
			return dir + "/big.yaml"
		},
		wantErr: "more than the 1048576 a configuration may have",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			configs, err := readRLSConfigs(tc.layout(t, t.TempDir()))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := domainsOf(configs); !slices.Equal(got, tc.want) {
				t.Fatalf("domains %q, want %q", got, tc.want)
			}
		})
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
