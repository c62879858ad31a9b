package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// configMapMount is a directory laid out as the kubelet mounts a
// ConfigMap: each key is a symbolic link through ..data into a directory
// of the version, and an update writes a new version's directory and
// swaps ..data to it in one rename (the kubelet's atomic writer); no file
// the node reads is ever written in place.
type configMapMount struct {
	t       *testing.T
	dir     string
	version int
}

func newConfigMapMount(t *testing.T, key, content string) *configMapMount {
	t.Helper()
	m := &configMapMount{t: t, dir: t.TempDir()}
	m.update(key, content)
	return m
}

// update makes key hold content, as a changed ConfigMap of one key does.
func (m *configMapMount) update(key, content string) {
	m.t.Helper()
	m.write(map[string]string{key: content})
}

// write makes the mount hold files, key by key, as a changed ConfigMap
// does.
func (m *configMapMount) write(files map[string]string) {
	t := m.t
	t.Helper()
	m.version++
	version := fmt.Sprintf("..2026_12_02_04_00_%02d.%d", m.version, m.version)
	if err := os.Mkdir(filepath.Join(m.dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	for key, content := range files {
		if err := os.WriteFile(filepath.Join(m.dir, version, key), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(m.dir, "..data"))
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for key := range files {
		if _, err := os.Lstat(filepath.Join(m.dir, key)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", key), filepath.Join(m.dir, key)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(m.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// edgeConfig is the domain edge limiting each remote_address to perHour
// requests an hour.
func edgeConfig(perHour int) string {
	return fmt.Sprintf("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: hour\n      requests_per_unit: %d\n", perHour)
}

// brokenEdgeConfig fails on line 5 (the unit), field
// descriptors[0].rate_limit.unit.
const brokenEdgeConfig = "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n"

// TestRLSConfigFollowsItsFile runs three nodes of the binary, each with
// -rls-config naming its own ConfigMap-style mount of one file, as three
// pods of a StatefulSet have. A changed file is in force within seconds
// on every node (Envoy's answers change); a broken one is logged with its
// line by every node and changes nothing; a domain the file names and the
// API deleted comes back with the file's next change; and when the
// ConfigMap reaches the pods at different times, the leader's file
// decides, and a new leader applies its own.
func TestRLSConfigFollowsItsFile(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "go")
	ctx := context.Background()
	ids := []string{"n1", "n2", "n3"}
	mounts := make([]*configMapMount, 3)
	nodes := make([]*process, 3)
	for i := range nodes {
		mounts[i] = newConfigMapMount(t, "edge.yaml", edgeConfig(2))
		args := []string{"-id", ids[i], "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-grpc", "127.0.0.1:0", "-data", t.TempDir(), "-rls-config", mounts[i].dir}
		if i > 0 {
			args = append(args, "-join", nodes[0].addrs.HTTP)
		}
		nodes[i] = startBinary(t, args...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, n := range nodes {
				t.Logf("%s's log:\n%s", ids[i], n.out.String())
			}
		}
	})
	testenv.WaitFor(t, "three members and a leader", func() bool {
		st, err := client.New(nil, nodes[2].addrs.HTTP).Cluster(ctx)
		return err == nil && len(st.Nodes) == 3 && st.Leader != ""
	})
	envoy := func(i int) ratelimitv3.RateLimitServiceClient {
		conn, err := grpc.NewClient(nodes[i].addrs.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return ratelimitv3.NewRateLimitServiceClient(conn)
	}
	clients := []ratelimitv3.RateLimitServiceClient{envoy(0), envoy(1), envoy(2)}
	// leader is the index of the node that leads, as a running node sees.
	leader := func() int {
		at := -1
		testenv.WaitFor(t, "a leader", func() bool {
			for _, n := range nodes {
				if n.hasExited() {
					continue
				}
				if st, err := client.New(nil, n.addrs.HTTP).Cluster(ctx); err == nil {
					for j, id := range ids {
						if id == st.Leader && !nodes[j].hasExited() {
							at = j
						}
					}
				}
				return at >= 0
			}
			return false
		})
		return at
	}
	// inForce waits until node i's view of the domain allows perHour, and
	// says how long that took.
	inForce := func(i, perHour int) time.Duration {
		t.Helper()
		start := time.Now()
		c := client.New(nil, nodes[i].addrs.HTTP)
		testenv.WaitFor(t, fmt.Sprintf("%s to hold edge at %d an hour", ids[i], perHour), func() bool {
			cfg, err := c.GetRLSConfig(ctx, "edge")
			return err == nil && len(cfg.Descriptors) == 1 && cfg.Descriptors[0].RateLimit != nil && cfg.Descriptors[0].RateLimit.RequestsPerUnit == uint32(perHour)
		})
		return time.Since(start)
	}
	// decides checks that node i admits perHour requests of a new client
	// and refuses the next, as Envoy asks.
	decides := func(i, perHour int, address string) {
		t.Helper()
		req := &ratelimitv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitcommon.RateLimitDescriptor{{
			Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: address}}}}}
		for call := 1; call <= perHour+1; call++ {
			want := ratelimitv3.RateLimitResponse_OK
			if call > perHour {
				want = ratelimitv3.RateLimitResponse_OVER_LIMIT
			}
			resp, err := clients[i].ShouldRateLimit(ctx, req)
			if err != nil || resp.OverallCode != want {
				t.Fatalf("%s, call %d for %s: %v, %v; want %v (a limit of %d an hour)", ids[i], call, address, resp.GetOverallCode(), err, want, perHour)
			}
		}
	}
	const slowest = 10 * time.Second // "within a few seconds", on a loaded machine
	inForce(2, 2)
	firstTerm := raftTerm(t, nodes[2].addrs.HTTP)
	decides(1, 2, "192.0.2.1")

	// A changed ConfigMap, on every pod.
	for _, m := range mounts {
		m.update("edge.yaml", edgeConfig(4))
	}
	took := inForce(2, 4)
	t.Logf("a changed file was in force on a follower %s after it changed", took.Round(time.Millisecond))
	if took > slowest {
		t.Errorf("a changed file took %s to be in force; want at most %s", took, slowest)
	}
	decides(1, 4, "192.0.2.2")

	// A broken one: every node says so, with the line; nothing changes.
	for _, m := range mounts {
		m.update("edge.yaml", brokenEdgeConfig)
	}
	for i, n := range nodes {
		testenv.WaitFor(t, ids[i]+" to log the broken file with its line", func() bool {
			out := n.out.String()
			return strings.Contains(out, "-rls-config is invalid") && strings.Contains(out, "descriptors[0].rate_limit.unit: line 5: unknown unit")
		})
	}
	metrics := scrapeText(t, nodes[0].addrs.HTTP)
	for _, want := range []string{"limitnode_rls_config_last_reload_successful 0", `limitnode_rls_config_reloads_total{result="invalid"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(metrics, "limitnode_rls_config"))
		}
	}
	inForce(2, 4)
	decides(2, 4, "192.0.2.3")

	// A domain the file names, deleted through the API, stays deleted
	// until the file changes.
	if err := client.New(nil, nodes[1].addrs.HTTP).DeleteRLSConfig(ctx, "edge"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(nil, nodes[2].addrs.HTTP).GetRLSConfig(ctx, "edge"); err == nil {
		t.Fatal("edge is there after its deletion")
	}

	// The file is mended, but the ConfigMap reaches the followers first
	// with another change: the leader's file decides (edge comes back as
	// it says) until another node leads.
	lead := leader()
	reads := func(n *process) int { return strings.Count(n.out.String(), `msg="read -rls-config"`) }
	readsBefore := []int{reads(nodes[0]), reads(nodes[1]), reads(nodes[2])}
	for i, m := range mounts {
		if i == lead {
			m.update("edge.yaml", edgeConfig(4))
		} else {
			m.update("edge.yaml", edgeConfig(6))
		}
	}
	for i, n := range nodes {
		testenv.WaitFor(t, ids[i]+" to read the mended file", func() bool {
			return reads(n) > readsBefore[i]
		})
	}
	follower := (lead + 1) % 3
	inForce(follower, 4)
	nodes[lead].stop() // hands leadership to another node
	inForce(follower, 6)
	decides(follower, 6, "192.0.2.4")
	page, err := client.New(nil, nodes[follower].addrs.HTTP).Audit(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	puts := 0
	for _, e := range page.Entries {
		if e.Action == "rls.put" && e.Subject == "edge" && e.Actor == rlsConfigActor {
			puts++
		}
	}
	// 4 an hour; again once the file was mended; 6 an hour. A leader
	// elected besides the one the test made (a loaded machine) puts its
	// file's configuration again if it differs, so the count is exact only
	// with one change of term.
	switch terms := raftTerm(t, nodes[follower].addrs.HTTP) - firstTerm; {
	case terms == 1 && puts != 3:
		t.Errorf("%d puts of edge by %s in the audit trail, want 3: %+v", puts, rlsConfigActor, page.Entries)
	case puts < 3:
		t.Errorf("%d puts of edge by %s in the audit trail, want at least 3: %+v", puts, rlsConfigActor, page.Entries)
	case terms != 1:
		t.Logf("%d terms besides the first, %d puts by %s", terms, puts, rlsConfigActor)
	}
}

// raftTerm is the Raft term addr's node is in, from its /metrics.
func raftTerm(t *testing.T, addr string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^limitnode_raft_term (\d+)$`).FindStringSubmatch(scrapeText(t, addr))
	if m == nil {
		t.Fatalf("%s's /metrics has no limitnode_raft_term", addr)
	}
	term, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return term
}

// scrapeText is addr's /metrics.
func scrapeText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// grepLines are the lines of text that hold s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
