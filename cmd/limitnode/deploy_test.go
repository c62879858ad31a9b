package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/certs"
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
// binary would silently run without it. The subcommands' variables
// (cliVars) may stand beside the node's.
func (inv invocation) config(t *testing.T) config {
	t.Helper()
	var said bytes.Buffer
	read := cliVars()
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

// cliVars are the variables the subcommands that ask a node read
// (LIMITNODE_ADDR, LIMITNODE_CA, LIMITNODE_TOKEN): a deployment sets them
// for an image's health check or for limitnode status in a container.
func cliVars() map[string]bool {
	read := map[string]bool{}
	var rf remoteFlags
	rf.add(flag.NewFlagSet("vars", flag.ContinueOnError), func(name string) string { read[name] = true; return "" }, 0)
	return read
}

// locally is what localNodes needs to run a deployment's secure nodes
// here: the local directory standing for each directory of its files
// (a mounted Secret, say), and how to call the nodes.
type locally struct {
	dirs   map[string]string // the deployment's directory to a local one
	client client.Options
}

// localNodes starts the invocations on this machine: every service or pod
// name:port (httpOf, raftOf) becomes localhost with a port the test holds
// (the nodes name each other before any starts), each node's own listen
// addresses become 127.0.0.1 with those ports, its data directory a
// temporary one, and the files it names under one of local.dirs those of
// the local directory. It returns the nodes and waits for one cluster of
// all of them, asked through local.client.
func localNodes(t *testing.T, ctx context.Context, invs []invocation, httpOf, raftOf func(i int) string, local locally) []running {
	t.Helper()
	locals := map[string]string{}
	localHTTP, localRaft := make([]string, len(invs)), make([]string, len(invs))
	for i := range invs {
		localHTTP[i], localRaft[i] = holdAddr(t), holdAddr(t)
		// The others know the node by a name, as in the deployment.
		locals[httpOf(i)], locals[raftOf(i)] = "localhost:"+portOf(t, localHTTP[i]), "localhost:"+portOf(t, localRaft[i])
	}
	var pairs []string
	for from, to := range locals {
		pairs = append(pairs, from, to)
	}
	rename := strings.NewReplacer(pairs...)
	var dirs []string
	for from, to := range local.dirs {
		dirs = append(dirs, from+"/", to+"/")
	}
	files := strings.NewReplacer(dirs...)
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
			return files.Replace(rename.Replace(v))
		}
		here := invocation{name: inv.name, env: map[string]string{}}
		for _, a := range inv.args {
			here.args = append(here.args, swap(a))
		}
		for k, v := range inv.env {
			here.env[k] = swap(v)
		}
		nodes = append(nodes, startNode(t, ctx, here.args, here.env))
	}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.addr)
	}
	testenv.WaitFor(t, fmt.Sprintf("the %d nodes to form one cluster", len(invs)), func() bool {
		return sameClusterVia(ctx, local.client, len(invs), func(client.ClusterStatus) bool { return true }, addrs...)
	})
	return nodes
}

// sameCluster reports whether every address answers with the same leader
// and size members, each with its HTTP address recorded, in a view that
// members accepts.
func sameCluster(ctx context.Context, size int, members func(client.ClusterStatus) bool, addrs ...string) bool {
	return sameClusterVia(ctx, client.Options{}, size, members, addrs...)
}

// sameClusterVia is sameCluster asking through a client with opts.
func sameClusterVia(ctx context.Context, opts client.Options, size int, members func(client.ClusterStatus) bool, addrs ...string) bool {
	leader := ""
	for _, addr := range addrs {
		st, err := client.NewWithOptions(opts, addr).Cluster(ctx)
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
	testenv.WaitFor(t, "the health check to pass", func() bool {
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
		GroupAdd    []string          `yaml:"group_add"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// composeVar is a variable of a compose file: ${NAME} or ${NAME:?message}.
var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:\?[^}]*)?\}`)

// interpolate replaces the variables of a compose file with their values
// in dotenv (a .env file's NAME=value lines), as docker compose does; a
// variable without a value is an error, as it is for ${NAME:?...}.
func interpolate(t *testing.T, text string, dotenv []byte) string {
	t.Helper()
	vars := map[string]string{}
	for line := range strings.SplitSeq(string(dotenv), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	return composeVar.ReplaceAllStringFunc(text, func(ref string) string {
		name := composeVar.FindStringSubmatch(ref)[1]
		v, ok := vars[name]
		if !ok || v == "" {
			t.Fatalf("docker-compose.yml needs %s, which .env does not give", name)
		}
		return v
	})
}

// buildLimitnode returns a directory that holds the binary of this tree,
// and nothing else, for scripts that run limitnode.
func buildLimitnode(t *testing.T) string {
	t.Helper()
	return filepath.Dir(buildBinary(t))
}

// TestDockerCompose: three services with identical flags but their names,
// each advertising its service name, -join naming every service, the data
// directory on its own volume, the published port the node's HTTP port;
// TLS on both ports and tokens, every file of which is in the read-only
// directory that deploy/compose-secrets.sh fills (which holds no CA key),
// readable through the group the services are added to, the join token
// from the .env file it writes. With the script's files, the services
// started here as written form one cluster.
func TestDockerCompose(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "sh")
	dir := t.TempDir()
	script := exec.Command("sh", "../../deploy/compose-secrets.sh", dir)
	script.Env = append(os.Environ(), "PATH="+buildLimitnode(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("compose-secrets.sh: %v\n%s", err, out)
	}
	dotenv, err := os.ReadFile(filepath.Join(dir, ".env"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../deploy/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal([]byte(interpolate(t, string(data), dotenv)), &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	image := readDockerfile(t)
	names := slices.Sorted(maps.Keys(f.Services))
	if len(names) != 3 {
		t.Fatalf("services %q, want three", names)
	}
	gid, err := exec.Command("id", "-g").Output()
	if err != nil {
		t.Fatal(err)
	}
	local := locally{dirs: map[string]string{}}
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
		if !slices.Equal(s.GroupAdd, []string{strings.TrimSpace(string(gid))}) {
			t.Errorf("%s is added to groups %q, not to the group of the secrets' owner (%s)", name, s.GroupAdd, gid)
		}
		inv := invocation{name: name, args: s.Command, env: maps.Clone(image.env)}
		maps.Copy(inv.env, s.Environment)
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
		var data []string
		for _, v := range s.Volumes {
			source, target, _ := strings.Cut(v, ":")
			if bind, ok := strings.CutPrefix(source, "./"); ok {
				target, mode, _ := strings.Cut(target, ":")
				if mode != "ro" {
					t.Errorf("%s mounts %s writable", name, v)
				}
				local.dirs[target] = filepath.Join(dir, bind)
				continue
			}
			if _, declared := f.Volumes[source]; declared && target == c.dataDir {
				data = append(data, v)
			}
		}
		if len(data) != 1 {
			t.Errorf("%s mounts %q; want one declared volume on its data directory %s", name, s.Volumes, c.dataDir)
		}
		checkSecureFiles(t, name, c, local.dirs)
		// The image's health check asks the node's own HTTPS API.
		if addr := inv.env["LIMITNODE_ADDR"]; addr != "https://127.0.0.1:"+portOf(t, c.httpAddr) || inv.env["LIMITNODE_CA"] != c.nodeCA {
			t.Errorf("%s: the health check asks %q trusting %q, not https://127.0.0.1:%s trusting %s", name, addr, inv.env["LIMITNODE_CA"], portOf(t, c.httpAddr), c.nodeCA)
		}
		if c.joinToken == "" {
			t.Errorf("%s sends no join token", name)
		}
		joins = append(joins, c.advertiseHTTP)
		invs = append(invs, inv)
	}
	for _, inv := range invs {
		if c := inv.config(t); c.join != strings.Join(joins, ",") {
			t.Errorf("%s joins %s, want %s", inv.name, c.join, strings.Join(joins, ","))
		}
	}
	for _, mounted := range local.dirs {
		if _, err := os.Stat(filepath.Join(mounted, certs.CAName+"-key.pem")); err == nil {
			t.Errorf("the nodes mount the CA's key (%s): whoever holds it makes members", mounted)
		}
	}
	ca, err := os.ReadFile(filepath.Join(dir, "secrets", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ops, err := os.ReadFile(filepath.Join(dir, "tokens", "ops.token"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	token, _, _ := strings.Cut(string(ops), "\n")
	local.client = client.Options{TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, Token: token}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	localNodes(t, ctx, invs,
		func(i int) string { return invs[i].config(t).advertiseHTTP },
		func(i int) string { return invs[i].config(t).advertiseRaft }, local)
}

// checkSecureFiles requires TLS on both ports and a token file, every file
// in one of dirs (a deployment's directory to the local one that holds
// its files) and present there.
func checkSecureFiles(t *testing.T, name string, c config, dirs map[string]string) {
	t.Helper()
	for flagName, file := range map[string]string{"-tls-cert": c.tlsCert, "-tls-key": c.tlsKey, "-node-cert": c.nodeCert, "-node-key": c.nodeKey, "-node-ca": c.nodeCA, "-auth": c.authFile} {
		here, ok := dirs[filepath.Dir(file)]
		if file == "" || !ok {
			t.Errorf("%s: %s %q is not a file of a mounted directory %v", name, flagName, file, slices.Sorted(maps.Keys(dirs)))
			continue
		}
		if _, err := os.Stat(filepath.Join(here, filepath.Base(file))); err != nil {
			t.Errorf("%s: %s: %v", name, flagName, err)
		}
	}
}

// k8sDoc is what the tests read of one Kubernetes object.
type k8sDoc struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
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
				Affinity   yaml.Node      `yaml:"affinity"`
				Containers []k8sContainer `yaml:"containers"`
				Volumes    []k8sVolume    `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
		Endpoints []k8sEndpoint `yaml:"endpoints"` // a ServiceMonitor's
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
			SecretKeyRef *k8sSecretKey `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  k8sProbe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type k8sSecretKey struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
}

type k8sVolume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName  string `yaml:"secretName"`
		DefaultMode int    `yaml:"defaultMode"`
		Items       []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"secret"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"`
		Scheme string `yaml:"scheme"`
	} `yaml:"httpGet"`
}

type k8sEndpoint struct {
	Port      string `yaml:"port"`
	Path      string `yaml:"path"`
	Scheme    string `yaml:"scheme"`
	TLSConfig struct {
		CA struct {
			Secret k8sSecretKey `yaml:"secret"`
		} `yaml:"ca"`
		ServerName string `yaml:"serverName"`
	} `yaml:"tlsConfig"`
	Authorization struct {
		Type        string       `yaml:"type"`
		Credentials k8sSecretKey `yaml:"credentials"`
	} `yaml:"authorization"`
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

// k8sObjects decodes a stream of Kubernetes objects by kind/name.
func k8sObjects(t *testing.T, what string, data []byte) map[string]k8sDoc {
	t.Helper()
	objects := map[string]k8sDoc{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d k8sDoc
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d.Kind != "" {
			objects[d.Kind+"/"+d.Metadata.Name] = d
		}
	}
	return objects
}

// k8sCluster is what checkK8sObjects learnt of a cluster's objects: how
// each pod starts, and how the pods name each other.
type k8sCluster struct {
	pods     []invocation
	peerName func(i int, port string) string
	// secretEnv are the variables that come from a Secret's key.
	secretEnv map[string]k8sSecretKey
	// mounted are the directories of Secret volumes, each with the Secret
	// and its keys by file name.
	mounted map[string]mountedSecret
	secure  bool
}

type mountedSecret struct {
	secret string
	keys   map[string]string // file name to the Secret's key
}

// checkK8sObjects checks a StatefulSet whose pods start at once with
// identical arguments that name them by their peer DNS names, a headless
// Service that publishes not-ready pods, a client Service, readiness on
// /readyz and liveness on /healthz, a PodDisruptionBudget that keeps a
// quorum, a volume per pod on the data directory, resources and
// anti-affinity; every selector finds the pods, every named port exists.
// Secure (unless insecure): HTTPS (probes too), mutual TLS on the Raft port
// and a token file, every file from a mounted Secret, the join token from
// a Secret through the environment and never on the command line.
func checkK8sObjects(t *testing.T, objects map[string]k8sDoc, insecure bool) k8sCluster {
	t.Helper()
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
	if callers.Spec.ClusterIP == "None" || callers.Spec.PublishNotReadyAddresses {
		t.Errorf("the callers' Service must balance over ready pods only")
	}
	for _, d := range []k8sDoc{headless, callers, pdb, sts} {
		for k, v := range d.labels(t) {
			if pod[k] != v {
				t.Errorf("%s %s selects %s=%s, which the pods lack", d.Kind, d.Metadata.Name, k, v)
			}
		}
	}
	spec := sts.Spec.Template.Spec
	if sc := spec.SecurityContext; !sc.RunAsNonRoot || fmt.Sprint(sc.RunAsUser) != imageUID || fmt.Sprint(sc.FSGroup) != imageUID {
		t.Errorf("pod securityContext %+v: run as the image's user %s, with the volume's group %s so that it can write", sc, imageUID, imageUID)
	}
	if sts.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("podManagementPolicy %q: the first pod would wait for a readiness that needs the others", sts.Spec.PodManagementPolicy)
	}
	if quorum := sts.Spec.Replicas/2 + 1; pdb.Spec.MaxUnavailable < 1 || sts.Spec.Replicas-pdb.Spec.MaxUnavailable < quorum {
		t.Errorf("PodDisruptionBudget maxUnavailable %d of %d voters: a quorum is %d", pdb.Spec.MaxUnavailable, sts.Spec.Replicas, quorum)
	}
	var affinity struct {
		PodAntiAffinity map[string]any `yaml:"podAntiAffinity"`
	}
	if err := spec.Affinity.Decode(&affinity); err != nil || len(affinity.PodAntiAffinity) == 0 {
		t.Errorf("no pod anti-affinity: two voters may share a machine (%v)", err)
	}

	ctr := spec.Containers[0]
	if ctr.Resources.Requests["cpu"] == "" || ctr.Resources.Requests["memory"] == "" || ctr.Resources.Limits["memory"] == "" {
		t.Errorf("resources %+v: requests of cpu and memory and a memory limit", ctr.Resources)
	}
	k := k8sCluster{secretEnv: map[string]k8sSecretKey{}, mounted: map[string]mountedSecret{}}
	env := map[string]string{}
	podNameVar := ""
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			podNameVar = e.Name
		case e.ValueFrom.SecretKeyRef != nil:
			k.secretEnv[e.Name] = *e.ValueFrom.SecretKeyRef
			env[e.Name] = "from-secret"
		default:
			env[e.Name] = e.Value
		}
	}
	volumes := map[string]k8sVolume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range ctr.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok || v.Secret == nil {
			continue
		}
		if !m.ReadOnly || v.Secret.DefaultMode&0o007 != 0 || v.Secret.DefaultMode&0o040 == 0 {
			t.Errorf("Secret %s mounted at %s: read-only, readable by the pod's group and no one else (mode %o)", v.Secret.SecretName, m.MountPath, v.Secret.DefaultMode)
		}
		ms := mountedSecret{secret: v.Secret.SecretName, keys: map[string]string{}}
		for _, item := range v.Secret.Items {
			ms.keys[item.Path] = item.Key
		}
		k.mounted[m.MountPath] = ms
	}
	ports := map[string]string{}
	for _, p := range ctr.Ports {
		ports[p.Name] = fmt.Sprint(p.ContainerPort)
	}
	podName := func(i int) string { return fmt.Sprintf("%s-%d", sts.Metadata.Name, i) }
	k.peerName = func(i int, port string) string { return podName(i) + "." + headless.Metadata.Name + ":" + ports[port] }
	var joinFlags, joins []string
	for i := range sts.Spec.Replicas {
		inv := invocation{name: podName(i), env: env}
		for _, a := range ctr.Args {
			inv.args = append(inv.args, strings.ReplaceAll(a, "$("+podNameVar+")", podName(i)))
		}
		c := inv.config(t)
		if c.id != podName(i) || c.advertiseRaft != k.peerName(i, "raft") || c.advertiseHTTP != k.peerName(i, "http") {
			t.Errorf("%s: ID %s, advertised %s and %s; want its pod name and peer DNS names", podName(i), c.id, c.advertiseRaft, c.advertiseHTTP)
		}
		if portOf(t, c.httpAddr) != ports["http"] || portOf(t, c.raftAddr) != ports["raft"] {
			t.Errorf("%s listens on %s and %s, its container ports are %v", podName(i), c.httpAddr, c.raftAddr, ports)
		}
		if c.grpcAddr != "" && portOf(t, c.grpcAddr) != ports["grpc"] {
			t.Errorf("%s serves gRPC on %s, its container ports are %v", podName(i), c.grpcAddr, ports)
		}
		if c.expect != sts.Spec.Replicas {
			t.Errorf("-bootstrap-expect %d for %d replicas", c.expect, sts.Spec.Replicas)
		}
		joins = append(joins, k.peerName(i, "http"))
		joinFlags = append(joinFlags, c.join)
		k.pods = append(k.pods, inv)
	}
	for _, j := range joinFlags {
		if j != strings.Join(joins, ",") {
			t.Errorf("-join %s, want every pod: %s", j, strings.Join(joins, ","))
		}
	}
	c := k.pods[0].config(t)
	k.secure = c.tlsCert != ""
	checkK8sSecurity(t, k, c, ctr, insecure)
	var dataMounts []string
	for _, m := range ctr.VolumeMounts {
		if _, secret := k.mounted[m.MountPath]; !secret {
			dataMounts = append(dataMounts, m.Name+" on "+m.MountPath)
		}
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || !slices.Equal(dataMounts, []string{sts.Spec.VolumeClaimTemplates[0].Metadata.Name + " on " + c.dataDir}) {
		t.Errorf("volume mounts %q, claims %+v: want the claim on the data directory %s", dataMounts, sts.Spec.VolumeClaimTemplates, c.dataDir)
	}
	scheme := "HTTP"
	if k.secure {
		scheme = "HTTPS"
	}
	for _, probe := range []struct {
		probe k8sProbe
		path  string
	}{{ctr.ReadinessProbe, "/readyz"}, {ctr.LivenessProbe, "/healthz"}} {
		if got := probe.probe.HTTPGet; got.Path != probe.path || got.Port != "http" || cmp.Or(got.Scheme, "HTTP") != scheme {
			t.Errorf("probe %+v, want %s on the http port over %s", got, probe.path, scheme)
		}
	}
	for _, svc := range []k8sDoc{headless, callers} {
		for _, p := range svc.Spec.Ports {
			if _, ok := ports[p.TargetPort]; !ok {
				t.Errorf("Service %s targets port %q, which the container lacks", svc.Metadata.Name, p.TargetPort)
			}
		}
	}
	if sm, ok := objects["ServiceMonitor/limitnode"]; ok {
		checkServiceMonitor(t, k, sm, headless, sts.Spec.Template.Spec.Volumes)
	}
	return k
}

// checkK8sSecurity: secure by default, with every file of the TLS and
// token flags in a mounted Secret and the join token from a Secret in the
// environment; without any of it only when asked for by name.
func checkK8sSecurity(t *testing.T, k k8sCluster, c config, ctr k8sContainer, insecure bool) {
	t.Helper()
	files := map[string]string{"-tls-cert": c.tlsCert, "-tls-key": c.tlsKey, "-node-cert": c.nodeCert, "-node-key": c.nodeKey, "-node-ca": c.nodeCA, "-auth": c.authFile}
	if insecure {
		for flagName, file := range files {
			if file != "" {
				t.Errorf("the insecure variant still gives %s %s", flagName, file)
			}
		}
		if len(k.mounted) > 0 || len(k.secretEnv) > 0 {
			t.Errorf("the insecure variant still needs Secrets: %v %v", k.mounted, k.secretEnv)
		}
		return
	}
	for flagName, file := range files {
		dir, name := filepath.Dir(file), filepath.Base(file)
		if _, ok := k.mounted[dir].keys[name]; !ok {
			t.Errorf("%s %q is not a file of a mounted Secret (%v)", flagName, file, k.mounted)
		}
	}
	if ref, ok := k.secretEnv[envName("join-token")]; !ok || ref.Name == "" || ref.Key == "" || c.joinToken == "" {
		t.Errorf("the join token does not come from a Secret as %s", envName("join-token"))
	}
	for _, a := range ctr.Args {
		if strings.Contains(a, "join-token") {
			t.Errorf("the join token is on the command line: %q", ctr.Args)
		}
	}
}

// checkServiceMonitor: the ServiceMonitor scrapes every pod through the
// peers Service (not-ready pods too) on the http port, over HTTPS with the
// Secret's CA and a name the certificate holds, and a token from a Secret,
// when the pods are secure.
func checkServiceMonitor(t *testing.T, k k8sCluster, sm, headless k8sDoc, volumes []k8sVolume) {
	t.Helper()
	for key, v := range sm.labels(t) {
		if headless.Metadata.Labels[key] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which Service %s lacks", key, v, headless.Metadata.Name)
		}
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
	}
	e := sm.Spec.Endpoints[0]
	if e.Port != "http" || e.Path != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes port %q path %q", e.Port, e.Path)
	}
	if !k.secure {
		if e.Scheme != "http" {
			t.Errorf("the ServiceMonitor scrapes %s pods that serve HTTP", e.Scheme)
		}
		return
	}
	tlsSecret := ""
	for _, v := range volumes {
		if v.Name == "tls" && v.Secret != nil {
			tlsSecret = v.Secret.SecretName
		}
	}
	if e.Scheme != "https" || e.TLSConfig.CA.Secret != (k8sSecretKey{Name: tlsSecret, Key: "ca.crt"}) || e.TLSConfig.ServerName == "" {
		t.Errorf("the ServiceMonitor's TLS %+v: https, the CA of Secret %s", e.TLSConfig, tlsSecret)
	}
	if e.Authorization.Type != "Bearer" || e.Authorization.Credentials.Name == "" || e.Authorization.Credentials.Key == "" {
		t.Errorf("the ServiceMonitor sends no token from a Secret: %+v", e.Authorization)
	}
}

// TestKubernetesManifests checks deploy/kubernetes/limitnode.yaml (the
// chart rendered with its defaults) with checkK8sObjects, makes its
// Secrets as the chart's README says, and starts the pods here, as
// written: they form one cluster over mutual TLS and HTTPS, with tokens.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../deploy/kubernetes/limitnode.yaml")
	if err != nil {
		t.Fatal(err)
	}
	k := checkK8sObjects(t, k8sObjects(t, "limitnode.yaml", data), false)
	secrets := chartSecrets(t)
	local := locally{dirs: map[string]string{}}
	for dir, ms := range k.mounted {
		here := t.TempDir()
		for file, key := range ms.keys {
			value, ok := secrets[ms.secret][key]
			if !ok {
				t.Fatalf("the chart's README makes no Secret %s with key %s, which the pods mount", ms.secret, key)
			}
			if err := os.WriteFile(filepath.Join(here, file), value, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		local.dirs[dir] = here
	}
	env := maps.Clone(k.pods[0].env)
	for name, ref := range k.secretEnv {
		value, ok := secrets[ref.Name][ref.Key]
		if !ok {
			t.Fatalf("the chart's README makes no Secret %s with key %s, which %s comes from", ref.Name, ref.Key, name)
		}
		env[name] = string(value)
	}
	for i := range k.pods {
		k.pods[i].env = env
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secrets["limitnode-tls"]["ca.crt"]) {
		t.Fatal("Secret limitnode-tls has no CA")
	}
	local.client = client.Options{TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, Token: env[envName("join-token")]}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	localNodes(t, ctx, k.pods, func(i int) string { return k.peerName(i, "http") }, func(i int) string { return k.peerName(i, "raft") }, local)
}

// TestSystemdUnit: the unit runs as a dynamic user with the data directory
// its state directory, and its command with the example environment file
// is a configuration the binary takes, with TLS on both ports and tokens,
// every file a credential that systemd hands over (%d) from the directory
// of the environment file, which holds the join token. The unit's own
// commands make the files; three machines' nodes, started here as
// written, form one cluster.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile("../../deploy/systemd/limitnode.service")
	if err != nil {
		t.Fatal(err)
	}
	settings, credentials := map[string]string{}, map[string]string{}
	var setup []string // the commands of the unit's comment
	for line := range strings.SplitSeq(string(unit), "\n") {
		if cmd, ok := strings.CutPrefix(line, "#   "); ok && (strings.HasPrefix(cmd, "limitnode certs") || strings.HasPrefix(cmd, "limitnode token") || strings.HasPrefix(cmd, "printf")) {
			setup = append(setup, cmd)
		}
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok || strings.HasPrefix(line, "#"):
		case k == "LoadCredential":
			name, source, _ := strings.Cut(v, ":")
			credentials[name] = source
		default:
			settings[k] = v
		}
	}
	envFile := strings.TrimPrefix(settings["EnvironmentFile"], "-")
	execStart := strings.Fields(settings["ExecStart"])
	if len(execStart) == 0 || execStart[0] != "/usr/local/bin/limitnode" || envFile == "" {
		t.Fatalf("ExecStart %q, EnvironmentFile %q", settings["ExecStart"], settings["EnvironmentFile"])
	}
	if settings["DynamicUser"] != "yes" || settings["User"] != "" {
		t.Errorf("DynamicUser=%s User=%s: the unit runs as a dynamic user, as the README says", settings["DynamicUser"], settings["User"])
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
	c := invocation{name: "limitnode.service", args: execStart[1:], env: vars}.config(t)
	if c.dataDir != "/var/lib/"+settings["StateDirectory"] {
		t.Errorf("data directory %s is not the state directory %s", c.dataDir, settings["StateDirectory"])
	}
	if c.expect > 0 && !slices.Contains(strings.Split(c.join, ","), c.httpAddr) {
		t.Errorf("-join %s does not name the node itself (%s), as every node's identical -join must", c.join, c.httpAddr)
	}
	files := map[string]string{"-tls-cert": c.tlsCert, "-tls-key": c.tlsKey, "-node-cert": c.nodeCert, "-node-key": c.nodeKey, "-node-ca": c.nodeCA, "-auth": c.authFile}
	for flagName, file := range files {
		name, ok := strings.CutPrefix(file, "%d/")
		if source := credentials[name]; !ok || filepath.Dir(source) != filepath.Dir(envFile) {
			t.Errorf("%s %q is not a credential loaded from %s", flagName, file, filepath.Dir(envFile))
		}
	}
	if c.joinToken == "" {
		t.Error("the environment file gives no join token")
	}

	// The three machines: the unit's commands make the CA, the
	// certificates and the tokens; each machine's /etc/limitnode holds its
	// certificate as node.pem.
	testenv.NeedPrograms(t, "sh")
	dir := t.TempDir()
	script := exec.Command("sh", "-c", "set -e\n"+strings.Join(setup, "\n"))
	script.Dir = dir
	script.Env = append(os.Environ(), "PATH="+buildLimitnode(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := script.CombinedOutput(); err != nil || len(setup) < 3 {
		t.Fatalf("the unit's commands %q: %v\n%s", setup, err, out)
	}
	join, err := os.ReadFile(filepath.Join(dir, "join.token"))
	if err != nil {
		t.Fatal(err)
	}
	joinToken, _, _ := strings.Cut(string(join), "\n")
	host, _, _ := strings.Cut(c.httpAddr, ":")
	var machines []invocation
	for i, other := range strings.Split(c.join, ",") {
		otherHost, _, _ := strings.Cut(other, ":")
		etc := t.TempDir()
		for name, source := range map[string]string{"ca.pem": "ca/ca.pem", "node.pem": "ca/" + otherHost + ".pem", "node-key.pem": "ca/" + otherHost + "-key.pem", "tokens.json": "tokens.json"} {
			copyFile(t, filepath.Join(dir, source), filepath.Join(etc, name))
		}
		inv := invocation{name: otherHost, env: map[string]string{}}
		for _, a := range execStart[1:] {
			inv.args = append(inv.args, strings.ReplaceAll(a, "%d", etc))
		}
		for k, v := range vars {
			inv.env[k] = strings.ReplaceAll(v, host+":", otherHost+":")
		}
		inv.env[envName("id")] = fmt.Sprintf("node%d", i+1)
		inv.env[envName("join-token")] = joinToken
		machines = append(machines, inv)
	}
	ops, err := os.ReadFile(filepath.Join(dir, "ops.token"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	opsToken, _, _ := strings.Cut(string(ops), "\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	localNodes(t, ctx, machines,
		func(i int) string { return machines[i].config(t).httpAddr },
		func(i int) string { return machines[i].config(t).raftAddr },
		locally{client: client.Options{TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, Token: opsToken}})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
