package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/internal/testenv"
)

// The Helm chart (deploy/helm/limitnode) is checked by helm itself (lint
// and template, built from its module at a fixed version: go caches the
// build) and by checkK8sObjects on what it renders, with its defaults
// and with each value that changes the pods; the plain manifests of
// deploy/kubernetes are its default rendering.

// helmModule is the helm command go run builds.
const helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"

// chartDir is the chart, from the repository's root.
const chartDir = "deploy/helm/limitnode"

var updateGenerated = flag.Bool("update", false, "rewrite deploy/kubernetes/limitnode.yaml from the Helm chart")

// helmBuildReserve is what the package's time limit (go test -timeout, 10
// minutes by default) keeps for its other tests beyond a wait for helm's
// build.
const helmBuildReserve = 2 * time.Minute

// helmBuild is the one build of helm the package's tests wait for, and its
// outcome.
var helmBuild struct {
	once sync.Once
	err  error
}

// buildHelm builds helm once, with go run (go caches the build: the first
// takes minutes on 2 cores, the next a second or two), and reports why
// helm cannot be run, or nil. The build has a time budget of its own: until
// helmBuildReserve before the package's time limit, so that the limit is
// never what fails. A build stopped there leaves what it compiled in go's
// cache, and the next run goes on from there.
func buildHelm(t *testing.T) error {
	helmBuild.once.Do(func() {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		budget := "no time limit"
		if deadline, ok := t.Deadline(); ok {
			ctx, cancel = context.WithDeadline(ctx, deadline.Add(-helmBuildReserve))
			budget = time.Until(deadline.Add(-helmBuildReserve)).Round(time.Second).String()
		}
		defer cancel()
		start := time.Now()
		out, err := exec.CommandContext(ctx, "go", "run", helmModule, "version").CombinedOutput()
		switch {
		case ctx.Err() != nil:
			helmBuild.err = fmt.Errorf("go run %s did not build helm within its budget of %s (the package's time limit less %s for the other tests); "+
				"what it compiled is cached: build it once with go run %s version, then test again", helmModule, budget, helmBuildReserve, helmModule)
		case err != nil:
			helmBuild.err = fmt.Errorf("go run %s cannot build helm: %w\n%s", helmModule, err, out)
		default:
			t.Logf("helm is built (go run %s version: %s)", helmModule, time.Since(start).Round(time.Millisecond))
		}
	})
	return helmBuild.err
}

// helm runs helm with args in the repository's root. Without a helm to
// run the test is skipped, except in CI, where it fails (.ci/run builds
// helm before the tests).
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	if err := buildHelm(t); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	cmd := exec.Command("go", append([]string{"run", helmModule}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, &helmError{args: args, err: err, stderr: stderr.String()}
	}
	return out, nil
}

type helmError struct {
	args   []string
	err    error
	stderr string
}

func (e *helmError) Error() string {
	return "helm " + strings.Join(e.args, " ") + ": " + e.err.Error() + "\n" + e.stderr
}

// mustRender renders the chart as release limitnode with the --set values.
func mustRender(t *testing.T, sets ...string) []byte {
	t.Helper()
	args := []string{"template", "limitnode", chartDir}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHelmChartLints: helm lint --strict passes, secure and insecure.
func TestHelmChartLints(t *testing.T) {
	t.Parallel()
	for _, sets := range [][]string{nil, {"--set", "insecureDisableTLSAndAuth=true,serviceMonitor.enabled=true"}} {
		if out, err := helm(t, append([]string{"lint", "--strict", chartDir}, sets...)...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
}

// TestKubernetesManifestsAreTheChart: deploy/kubernetes/limitnode.yaml is
// what the chart renders with its defaults (go test -run this -update
// rewrites it).
func TestKubernetesManifestsAreTheChart(t *testing.T) {
	t.Parallel()
	rendered := mustRender(t)
	const file = "../../deploy/kubernetes/limitnode.yaml"
	header := []byte("# deploy/helm/limitnode rendered with its defaults (helm template limitnode\n" +
		"# deploy/helm/limitnode). Do not edit: change the chart, then rewrite this with\n" +
		"#   go test ./cmd/limitnode -run TestKubernetesManifestsAreTheChart -update\n" +
		"# Make the Secrets it mounts first: see README.md beside this file.\n")
	want := append(header, rendered...)
	if *updateGenerated {
		if err := os.WriteFile(file, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatalf("%s is not the chart's rendering: run go test ./cmd/limitnode -run TestKubernetesManifestsAreTheChart -update", file)
	}
}

// TestHelmChartRenders checks what each value that changes the pods
// renders, with checkK8sObjects: every flag one the binary takes, every
// port, Secret and probe in place.
func TestHelmChartRenders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		sets     []string
		insecure bool
		check    func(t *testing.T, k k8sCluster)
	}{
		{name: "secure by default", check: func(t *testing.T, k k8sCluster) {
			if !k.secure {
				t.Error("the defaults render no TLS")
			}
		}},
		{name: "insecure only when named", sets: []string{"insecureDisableTLSAndAuth=true"}, insecure: true},
		{name: "a ServiceMonitor over HTTPS with a token", sets: []string{"serviceMonitor.enabled=true"}},
		{name: "a ServiceMonitor without TLS", sets: []string{"serviceMonitor.enabled=true", "insecureDisableTLSAndAuth=true"}, insecure: true},
		{name: "five voters, gRPC and more flags", sets: []string{"replicas=5", "podDisruptionBudget.maxUnavailable=2", "antiAffinity=hard", "grpc.enabled=true", "extraFlags.log-level=debug", "extraFlags.max-keys=1000"},
			check: func(t *testing.T, k k8sCluster) {
				c := k.pods[0].config(t)
				if len(k.pods) != 5 || c.grpcAddr == "" || c.logLevel != "debug" || c.maxKeys != 1000 {
					t.Errorf("%d pods, gRPC %q, log level %q, max keys %d", len(k.pods), c.grpcAddr, c.logLevel, c.maxKeys)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objects := k8sObjects(t, tc.name, mustRender(t, tc.sets...))
			k := checkK8sObjects(t, objects, tc.insecure)
			_, monitored := objects["ServiceMonitor/limitnode"]
			if wantMonitor := strings.Contains(strings.Join(tc.sets, ","), "serviceMonitor.enabled=true"); monitored != wantMonitor {
				t.Errorf("a ServiceMonitor: %v, want %v", monitored, wantMonitor)
			}
			if tc.check != nil {
				tc.check(t, k)
			}
		})
	}
}

// TestHelmChartRefusesWhatBreaksTheCluster: values that would let a drain
// take the quorum or block every drain, and an anti-affinity the chart
// does not know, fail to render.
func TestHelmChartRefusesWhatBreaksTheCluster(t *testing.T) {
	t.Parallel()
	for _, set := range []string{"podDisruptionBudget.maxUnavailable=2", "podDisruptionBudget.maxUnavailable=0", "antiAffinity=always"} {
		t.Run(set, func(t *testing.T) {
			t.Parallel()
			if _, err := helm(t, "template", "limitnode", chartDir, "--set", set); err == nil {
				t.Errorf("--set %s renders", set)
			}
		})
	}
}

// chartSecrets runs the chart README's commands that make the Secrets,
// with the limitnode built from this tree and a kubectl that writes each
// Secret's keys to files, and returns the Secrets by name and key.
func chartSecrets(t *testing.T) map[string]map[string][]byte {
	t.Helper()
	testenv.NeedPrograms(t, "bash", "go")
	data, err := os.ReadFile("../../deploy/helm/limitnode/README.md")
	if err != nil {
		t.Fatal(err)
	}
	script := ""
	for _, block := range strings.Split(string(data), "```sh\n")[1:] {
		if block, _, _ = strings.Cut(block, "```"); strings.Contains(block, "limitnode certs") {
			script = block
		}
	}
	if script == "" {
		t.Fatal("the chart's README has no sh block that runs limitnode certs")
	}
	dir, bin := t.TempDir(), buildLimitnode(t)
	const kubectl = `kubectl() {
  [ "$1" = -n ] && shift 2
  [ "$1 $2 $3" = "create secret generic" ] || { echo "kubectl $*: not a Secret" >&2; return 1; }
  local name=$4 kv; shift 4
  mkdir -p "$SECRETS_MADE/$name"
  for a in "$@"; do
    case $a in
      --from-file=*=*) kv=${a#--from-file=}; cp "${kv#*=}" "$SECRETS_MADE/$name/${kv%%=*}" ;;
      *) echo "kubectl: $a is not a --from-file=KEY=FILE" >&2; return 1 ;;
    esac
  done
}
`
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+kubectl+script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "SECRETS_MADE="+filepath.Join(dir, "secrets"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the chart's README's Secrets: %v\n%s", err, out)
	}
	secrets := map[string]map[string][]byte{}
	names, _ := os.ReadDir(filepath.Join(dir, "secrets"))
	for _, n := range names {
		keys, _ := os.ReadDir(filepath.Join(dir, "secrets", n.Name()))
		secrets[n.Name()] = map[string][]byte{}
		for _, k := range keys {
			value, err := os.ReadFile(filepath.Join(dir, "secrets", n.Name(), k.Name()))
			if err != nil {
				t.Fatal(err)
			}
			secrets[n.Name()][k.Name()] = value
		}
	}
	return secrets
}

// TestTheDocsSayHowToGetHelm: the pages that use helm say where to get it,
// or how to run the very helm the tests build, with Go alone.
func TestTheDocsSayHowToGetHelm(t *testing.T) {
	t.Parallel()
	for _, page := range []string{"docs/operations.md", chartDir + "/README.md"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "go run "+helmModule) || !strings.Contains(string(data), "https://helm.sh/docs/intro/install/") {
			t.Errorf("%s uses helm without saying how to get it (go run %s, or helm.sh's releases)", page, helmModule)
		}
	}
}
