package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
	"go.yaml.in/yaml/v3"
)

// The deployment files (Dockerfile, deploy/) are checked here as far as a
// machine without a container runtime allows: each file parses, every
// flag and variable it gives the binary is one the binary takes, the ports
// and paths agree with each other, and the nodes it describes, started with
// exactly its arguments (host names and the data directory swapped for
// local ones), form their cluster.

// invocation is how a deployment file starts a node.
type invocation struct {
	name string // service, pod or unit name
	args []string
	env  map[string]string
}

// config parses the invocation as the binary would; a variable the binary
// never reads (a misspelt LIMITNODE_ name) is an error too, since the
// binary would silently run without it.
func (inv invocation) config(t *testing.T) config {
	t.Helper()
	var said bytes.Buffer
	read := map[string]bool{}
	getenv := func(name string) string { read[name] = true; return inv.env[name] }
	c, err := parseConfig(inv.args, getenv, &said)
	if err != nil {
		first, _, _ := strings.Cut(said.String(), "\n")
		t.Fatalf("%s: the binary refuses %q with %v: %v %s", inv.name, inv.args, inv.env, err, first)
	}
	for name := range inv.env {
		if !read[name] {
			t.Fatalf("%s: the binary has no flag for %s", inv.name, name)
		}
	}
	return c
}

// localNodes starts the invocations on this machine: every service or pod
// name:port (httpOf, raftOf) becomes localhost with a free port, each
// node's own listen addresses become 127.0.0.1 with those ports, and its
// data directory a temporary one. It returns the nodes' HTTP addresses and waits for one
// cluster of all of them.
func localNodes(t *testing.T, ctx context.Context, invs []invocation, httpOf, raftOf func(i int) string) []running {
	t.Helper()
	locals := map[string]string{}
	localHTTP, localRaft := make([]string, len(invs)), make([]string, len(invs))
	for i := range invs {
		localHTTP[i], localRaft[i] = testenv.FreeAddr(t), testenv.FreeAddr(t)
		// The others know the node by a name, as in the deployment.
		locals[httpOf(i)], locals[raftOf(i)] = "localhost:"+portOf(t, localHTTP[i]), "localhost:"+portOf(t, localRaft[i])
	}
	var pairs []string
	for from, to := range locals {
		pairs = append(pairs, from, to)
	}
	rename := strings.NewReplacer(pairs...)
	var nodes []running
	for i, inv := range invs {
		c := inv.config(t)
		own := strings.NewReplacer(c.httpAddr, localHTTP[i], c.raftAddr, localRaft[i])
		swap := func(v string) string {
			if v == c.dataDir {
				return t.TempDir()
			}
			if v == c.httpAddr || v == c.raftAddr {
				return own.Replace(v)
			}
			return rename.Replace(v)
		}
		local := invocation{name: inv.name, env: map[string]string{}}
		for _, a := range inv.args {
			local.args = append(local.args, swap(a))
		}
		for k, v := range inv.env {
			local.env[k] = swap(v)
		}
		nodes = append(nodes, startNode(t, ctx, local.args, local.env))
	}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.addr)
	}
	waitFor(t, fmt.Sprintf("the %d nodes to form one cluster", len(invs)), func() bool {
		return sameCluster(ctx, len(invs), func(client.ClusterStatus) bool { return true }, addrs...)
	})
	return nodes
}

// sameCluster reports whether every address answers with the same leader
// and size members, each with its HTTP address recorded, in a view that
// members accepts.
func sameCluster(ctx context.Context, size int, members func(client.ClusterStatus) bool, addrs ...string) bool {
	leader := ""
	for _, addr := range addrs {
		st, err := client.New(nil, addr).Cluster(ctx)
		if err != nil || st.Leader == "" || len(st.Nodes) != size || !allHaveHTTPAddrs(st) || (leader != "" && st.Leader != leader) || !members(st) {
			return false
		}
		leader = st.Leader
	}
	return true
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q is not host:port: %v", addr, err)
	}
	return port
}

// dockerfile is what the tests read of the Dockerfile: the final stage's
// instructions.
type dockerfile struct {
	finalFrom   string
	build       string // the RUN line that builds the binary
	env         map[string]string
	user        string
	chowned     map[string]string // COPY destination to its --chown owner
	volumes     []string
	expose      []string
	healthcheck []string
	entrypoint  []string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	d := dockerfile{env: map[string]string{}}
	execForm := func(what, s string) []string {
		var out []string
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			t.Fatalf("Dockerfile: %s %s is not the exec form: %v", what, s, err)
		}
		return out
	}
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch instr {
		case "FROM":
			d = dockerfile{env: map[string]string{}, chowned: map[string]string{}, build: d.build}
			d.finalFrom = rest
		case "COPY":
			fields := strings.Fields(rest)
			for _, f := range fields {
				if owner, ok := strings.CutPrefix(f, "--chown="); ok {
					d.chowned[fields[len(fields)-1]] = owner
				}
			}
		case "RUN":
			if strings.Contains(rest, "go build") {
				d.build = rest
			}
		case "ENV":
			for kv := range strings.FieldsSeq(rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("Dockerfile: ENV %q is not KEY=VALUE", kv)
				}
				d.env[k] = v
			}
		case "USER":
			d.user = rest
		case "VOLUME":
			d.volumes = strings.Fields(rest)
		case "EXPOSE":
			d.expose = strings.Fields(rest)
		case "HEALTHCHECK":
			_, cmd, ok := strings.Cut(rest, "CMD ")
			if !ok {
				t.Fatalf("Dockerfile: HEALTHCHECK without CMD: %s", rest)
			}
			d.healthcheck = execForm("HEALTHCHECK CMD", cmd)
		case "ENTRYPOINT":
			d.entrypoint = execForm("ENTRYPOINT", rest)
		case "WORKDIR", "CMD", "ARG", "LABEL":
		default:
			t.Fatalf("Dockerfile: instruction %s is not one this test reads", instr)
		}
	}
	return d
}

// imageUID is the user distroless's nonroot images run as.
const imageUID = "65532"

// TestDockerfile: a static build, a distroless final image as a non-root
// user, /data the data directory and a volume, the node's ports exposed,
// and a health check that is the binary's own health subcommand and
// answers "healthy" on a node started as the image starts it.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	d := readDockerfile(t)
	if !strings.Contains(d.build, "CGO_ENABLED=0") || !strings.Contains(d.build, "./cmd/limitnode") {
		t.Errorf("the build is not a static build of ./cmd/limitnode: %s", d.build)
	}
	if !strings.Contains(d.finalFrom, "distroless") && d.finalFrom != "scratch" {
		t.Errorf("final image %s is neither distroless nor scratch", d.finalFrom)
	}
	if d.user == "" || strings.HasPrefix(d.user, "root") || strings.HasPrefix(d.user, "0") {
		t.Errorf("the image runs as %q, not a non-root user", d.user)
	}
	const binary = "/usr/local/bin/limitnode"
	if !slices.Equal(d.entrypoint, []string{binary}) {
		t.Fatalf("ENTRYPOINT %q, want [%s]", d.entrypoint, binary)
	}
	node := invocation{name: "image", env: d.env}
	c := node.config(t)
	if !slices.Equal(d.volumes, []string{c.dataDir}) || c.dataDir != "/data" {
		t.Errorf("VOLUME %q, data directory %s: want /data for both", d.volumes, c.dataDir)
	}
	// distroless's nonroot user is 65532; a new volume takes the owner of
	// its mount point in the image, which must be that user.
	if owner := d.chowned[c.dataDir]; d.user != "nonroot:nonroot" || owner != imageUID+":"+imageUID {
		t.Errorf("USER %s, %s owned by %q: the data directory must belong to the user the image runs as (%s)", d.user, c.dataDir, owner, imageUID)
	}
	if !slices.Contains(d.expose, portOf(t, c.httpAddr)) || !slices.Contains(d.expose, portOf(t, c.raftAddr)) {
		t.Errorf("EXPOSE %q lacks the HTTP (%s) or Raft (%s) port", d.expose, c.httpAddr, c.raftAddr)
	}
	if len(d.healthcheck) < 2 || d.healthcheck[0] != binary || d.healthcheck[1] != "health" {
		t.Fatalf("HEALTHCHECK runs %q, not %s health", d.healthcheck, binary)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The image's node, on local ports: its health check (with -addr for
	// the local port, as 127.0.0.1:7070 is inside the container) exits 0
	// once it leads.
	local := map[string]string{}
	for k, v := range d.env {
		local[k] = v
	}
	local["LIMITNODE_HTTP"], local["LIMITNODE_RAFT"], local["LIMITNODE_DATA"] = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	n := startNode(t, ctx, nil, local)
	check := append(slices.Clone(d.healthcheck[1:]), "-addr", n.addr)
	var stdout, stderr bytes.Buffer
	waitFor(t, "the health check to pass", func() bool {
		stdout.Reset()
		stderr.Reset()
		return dispatch(ctx, check, os.Getenv, &stdout, &stderr) == exitOK
	})
	if strings.TrimSpace(stdout.String()) != "ready" {
		t.Fatalf("health check printed %q", stdout.String())
	}
}

// composeFile is what the tests read of deploy/docker-compose.yml.
type composeFile struct {
	Services map[string]struct {
		Build struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Hostname    string            `yaml:"hostname"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// TestDockerCompose: three services with identical flags but their names,
// each advertising its service name, -join naming every service, the data
// directory on its own volume, the published port the node's HTTP port;
// started here as written, they form one cluster.
func TestDockerCompose(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../deploy/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	image := readDockerfile(t)
	names := slices.Sorted(maps.Keys(f.Services))
	if len(names) != 3 {
		t.Fatalf("services %q, want three", names)
	}
	var invs []invocation
	var joins []string
	for _, name := range names {
		s := f.Services[name]
		if s.Build.Context != ".." || s.Build.Dockerfile != "Dockerfile" {
			t.Errorf("%s builds %s/%s, not the repository's Dockerfile", name, s.Build.Context, s.Build.Dockerfile)
		}
		if !slices.Equal(s.Command, f.Services[names[0]].Command) {
			t.Errorf("%s's command %q differs from %s's", name, s.Command, names[0])
		}
		inv := invocation{name: name, args: s.Command, env: map[string]string{}}
		for k, v := range image.env {
			inv.env[k] = v
		}
		for k, v := range s.Environment {
			inv.env[k] = v
		}
		c := inv.config(t)
		if c.id != name || s.Hostname != name {
			t.Errorf("service %s has ID %s and hostname %s", name, c.id, s.Hostname)
		}
		if c.advertiseRaft != name+":"+portOf(t, c.raftAddr) || c.advertiseHTTP != name+":"+portOf(t, c.httpAddr) {
			t.Errorf("%s advertises %s and %s, not its service name with its ports", name, c.advertiseRaft, c.advertiseHTTP)
		}
		if c.expect != len(names) {
			t.Errorf("%s: -bootstrap-expect %d for %d services", name, c.expect, len(names))
		}
		if len(s.Ports) != 1 || !strings.HasSuffix(s.Ports[0], ":"+portOf(t, c.httpAddr)) {
			t.Errorf("%s publishes %q, not its HTTP port %s", name, s.Ports, c.httpAddr)
		}
		volume, target, _ := strings.Cut(strings.Join(s.Volumes, ""), ":")
		if _, declared := f.Volumes[volume]; !declared || target != c.dataDir || len(s.Volumes) != 1 {
			t.Errorf("%s mounts %q; want one declared volume on its data directory %s", name, s.Volumes, c.dataDir)
		}
		joins = append(joins, c.advertiseHTTP)
		invs = append(invs, inv)
	}
	for _, inv := range invs {
		if c := inv.config(t); c.join != strings.Join(joins, ",") {
			t.Errorf("%s joins %s, want %s", inv.name, c.join, strings.Join(joins, ","))
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	localNodes(t, ctx, invs,
		func(i int) string { return invs[i].config(t).advertiseHTTP },
		func(i int) string { return invs[i].config(t).advertiseRaft })
}

// k8sDoc is what the tests read of one Kubernetes object.
type k8sDoc struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		ClusterIP                string    `yaml:"clusterIP"`
		PublishNotReadyAddresses bool      `yaml:"publishNotReadyAddresses"`
		Selector                 yaml.Node `yaml:"selector"`
		Ports                    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		MaxUnavailable      int    `yaml:"maxUnavailable"`
		ServiceName         string `yaml:"serviceName"`
		Replicas            int    `yaml:"replicas"`
		PodManagementPolicy string `yaml:"podManagementPolicy"`
		Template            struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				SecurityContext struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
					FSGroup      int  `yaml:"fsGroup"`
				} `yaml:"securityContext"`
				Containers []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type k8sContainer struct {
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom struct {
			FieldRef struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  k8sProbe `yaml:"livenessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// labels decodes a selector: a Service's is the labels themselves, the
// others' are under matchLabels.
func (d k8sDoc) labels(t *testing.T) map[string]string {
	t.Helper()
	var out map[string]string
	if d.Kind == "Service" {
		if err := d.Spec.Selector.Decode(&out); err != nil {
			t.Fatalf("%s %s: selector: %v", d.Kind, d.Metadata.Name, err)
		}
		return out
	}
	var s struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	if err := d.Spec.Selector.Decode(&s); err != nil {
		t.Fatalf("%s %s: selector: %v", d.Kind, d.Metadata.Name, err)
	}
	return s.MatchLabels
}

// TestKubernetesManifests: a StatefulSet whose pods start at once with
// identical arguments that name them by their peer DNS names, a headless
// Service that publishes not-ready pods, a client Service, readiness on
// /readyz, a PodDisruptionBudget that keeps a quorum, a volume per pod on
// the data directory; every selector finds the pods, every named port
// exists; started here as written, the pods form one cluster.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../deploy/kubernetes/limitnode.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string]k8sDoc{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d k8sDoc
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("limitnode.yaml: %v", err)
		}
		objects[d.Kind+"/"+d.Metadata.Name] = d
	}
	sts, ok := objects["StatefulSet/limitnode"]
	if !ok || len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("no StatefulSet limitnode with one container in %v", slices.Sorted(maps.Keys(objects)))
	}
	pod := sts.Spec.Template.Metadata.Labels
	headless, callers := objects["Service/"+sts.Spec.ServiceName], objects["Service/limitnode"]
	pdb := objects["PodDisruptionBudget/limitnode"]
	if headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("peer Service %q: clusterIP %q, publishNotReadyAddresses %v", sts.Spec.ServiceName, headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	for _, d := range []k8sDoc{headless, callers, pdb, sts} {
		for k, v := range d.labels(t) {
			if pod[k] != v {
				t.Errorf("%s %s selects %s=%s, which the pods lack", d.Kind, d.Metadata.Name, k, v)
			}
		}
	}
	if sc := sts.Spec.Template.Spec.SecurityContext; !sc.RunAsNonRoot || fmt.Sprint(sc.RunAsUser) != imageUID || fmt.Sprint(sc.FSGroup) != imageUID {
		t.Errorf("pod securityContext %+v: run as the image's user %s, with the volume's group %s so that it can write", sc, imageUID, imageUID)
	}
	if sts.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("podManagementPolicy %q: the first pod would wait for a readiness that needs the others", sts.Spec.PodManagementPolicy)
	}
	if quorum := sts.Spec.Replicas/2 + 1; pdb.Spec.MaxUnavailable < 1 || sts.Spec.Replicas-pdb.Spec.MaxUnavailable < quorum {
		t.Errorf("PodDisruptionBudget maxUnavailable %d of %d voters: a quorum is %d", pdb.Spec.MaxUnavailable, sts.Spec.Replicas, quorum)
	}

	ctr := sts.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	podNameVar := ""
	for _, e := range ctr.Env {
		if e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			podNameVar = e.Name
		} else {
			env[e.Name] = e.Value
		}
	}
	ports := map[string]string{}
	for _, p := range ctr.Ports {
		ports[p.Name] = fmt.Sprint(p.ContainerPort)
	}
	podName := func(i int) string { return fmt.Sprintf("%s-%d", sts.Metadata.Name, i) }
	peerName := func(i int, port string) string { return podName(i) + "." + headless.Metadata.Name + ":" + ports[port] }
	var joinFlags, joins []string
	var pods []invocation
	for i := range sts.Spec.Replicas {
		inv := invocation{name: podName(i), env: env}
		for _, a := range ctr.Args {
			inv.args = append(inv.args, strings.ReplaceAll(a, "$("+podNameVar+")", podName(i)))
		}
		c := inv.config(t)
		if c.id != podName(i) || c.advertiseRaft != peerName(i, "raft") || c.advertiseHTTP != peerName(i, "http") {
			t.Errorf("%s: ID %s, advertised %s and %s; want its pod name and peer DNS names", podName(i), c.id, c.advertiseRaft, c.advertiseHTTP)
		}
		if portOf(t, c.httpAddr) != ports["http"] || portOf(t, c.raftAddr) != ports["raft"] {
			t.Errorf("%s listens on %s and %s, its container ports are %v", podName(i), c.httpAddr, c.raftAddr, ports)
		}
		if c.expect != sts.Spec.Replicas {
			t.Errorf("-bootstrap-expect %d for %d replicas", c.expect, sts.Spec.Replicas)
		}
		joins = append(joins, peerName(i, "http"))
		joinFlags = append(joinFlags, c.join)
		pods = append(pods, inv)
	}
	for _, j := range joinFlags {
		if j != strings.Join(joins, ",") {
			t.Errorf("-join %s, want every pod: %s", j, strings.Join(joins, ","))
		}
	}
	c := pods[0].config(t)
	if len(ctr.VolumeMounts) != 1 || len(sts.Spec.VolumeClaimTemplates) != 1 ||
		ctr.VolumeMounts[0].Name != sts.Spec.VolumeClaimTemplates[0].Metadata.Name || ctr.VolumeMounts[0].MountPath != c.dataDir {
		t.Errorf("volume mounts %+v, claims %+v: want the claim on the data directory %s", ctr.VolumeMounts, sts.Spec.VolumeClaimTemplates, c.dataDir)
	}
	for _, probe := range []struct {
		probe k8sProbe
		path  string
	}{{ctr.ReadinessProbe, "/readyz"}, {ctr.LivenessProbe, "/healthz"}} {
		if probe.probe.HTTPGet.Path != probe.path || probe.probe.HTTPGet.Port != "http" {
			t.Errorf("probe %+v, want %s on the http port", probe.probe.HTTPGet, probe.path)
		}
	}
	for _, svc := range []k8sDoc{headless, callers} {
		for _, p := range svc.Spec.Ports {
			if _, ok := ports[p.TargetPort]; !ok {
				t.Errorf("Service %s targets port %q, which the container lacks", svc.Metadata.Name, p.TargetPort)
			}
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	localNodes(t, ctx, pods, func(i int) string { return peerName(i, "http") }, func(i int) string { return peerName(i, "raft") })
}

// TestSystemdUnit: the unit's command and its example environment file are
// a configuration the binary takes, with the data directory the unit's
// state directory.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile("../../deploy/systemd/limitnode.service")
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for line := range strings.SplitSeq(string(unit), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			settings[k] = v
		}
	}
	envFile := strings.TrimPrefix(settings["EnvironmentFile"], "-")
	exec := strings.Fields(settings["ExecStart"])
	if len(exec) == 0 || exec[0] != "/usr/local/bin/limitnode" || envFile == "" {
		t.Fatalf("ExecStart %q, EnvironmentFile %q", settings["ExecStart"], settings["EnvironmentFile"])
	}
	example, err := os.ReadFile(filepath.Join("../../deploy/systemd", filepath.Base(envFile)))
	if err != nil {
		t.Fatalf("the example of %s: %v", envFile, err)
	}
	vars := map[string]string{}
	for line := range strings.SplitSeq(string(example), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(k, "LIMITNODE_") {
			t.Fatalf("%s: %q is not LIMITNODE_NAME=value", envFile, line)
		}
		vars[k] = v
	}
	c := invocation{name: "limitnode.service", args: exec[1:], env: vars}.config(t)
	if c.dataDir != "/var/lib/"+settings["StateDirectory"] {
		t.Errorf("data directory %s is not the state directory %s", c.dataDir, settings["StateDirectory"])
	}
	if c.expect > 0 && !slices.Contains(strings.Split(c.join, ","), c.httpAddr) {
		t.Errorf("-join %s does not name the node itself (%s), as every node's identical -join must", c.join, c.httpAddr)
	}
}
