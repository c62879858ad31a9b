package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/limitnode/limitnode/rls"
	"github.com/limitnode/limitnode/testcluster"
	"google.golang.org/grpc"
)

// benchNode is what a target that calls a node over the network needs of
// it: *testcluster.Node in this process, *processNode in a process.
type benchNode interface {
	URL() string
	DialGRPC() *grpc.ClientConn
}

// netCluster is a 3-node cluster that targets call over HTTP and gRPC:
// the binary in three processes (processCluster), or testcluster's nodes
// inside limitbench (inProcessCluster, with -in-process).
type netCluster interface {
	members() []benchNode
	leader() (benchNode, error)
	// putRLSDomain stores an RLS domain's YAML in the cluster.
	putRLSDomain(name, yaml string) error
	// servers are the processes whose CPU a decision costs.
	servers() []serverProcess
	// where says where the nodes run, for the results: whereProcesses or
	// whereInProcess.
	where() string
}

// Where a target's servers run, as the results say.
const (
	whereProcesses = "processes"
	whereInProcess = "in process"
)

// inProcessCluster is a testcluster.Cluster inside limitbench.
type inProcessCluster struct{ c *testcluster.Cluster }

var _ netCluster = inProcessCluster{}

func (ic inProcessCluster) members() []benchNode {
	out := make([]benchNode, len(ic.c.Nodes))
	for i, n := range ic.c.Nodes {
		out[i] = n
	}
	return out
}

func (ic inProcessCluster) leader() (benchNode, error) { return ic.c.WaitLeader(), nil }

func (ic inProcessCluster) putRLSDomain(_, yaml string) error {
	conf, perr := rls.Parse([]byte(yaml))
	if perr != nil {
		return perr
	}
	if err := ic.c.WaitLeader().Node().PutRLSConfig(context.Background(), conf); err != nil {
		return fmt.Errorf("store the %s domain: %w", conf.Domain, err)
	}
	return nil
}

func (ic inProcessCluster) servers() []serverProcess {
	return []serverProcess{selfProcess(inProcessName)}
}

func (ic inProcessCluster) where() string { return whereInProcess }

// inProcessName is limitbench's process when the nodes run in it.
const inProcessName = "limitbench (3 nodes and the load)"

// via returns the nodes callers use, as -via says: all of them (caller i on
// node i mod 3), the leader, or one follower.
func (e *environment) via(c netCluster) ([]benchNode, error) {
	if e.opts.via == "all" {
		return c.members(), nil
	}
	leader, err := c.leader()
	if err != nil {
		return nil, err
	}
	if e.opts.via == "leader" {
		return []benchNode{leader}, nil
	}
	for _, n := range c.members() {
		if n != leader {
			return []benchNode{n}, nil
		}
	}
	return nil, fmt.Errorf("no follower")
}

// urls are the nodes' HTTP base URLs.
func urls(nodes []benchNode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.URL()
	}
	return out
}

// netCluster returns the 3-node cluster of kind (see cluster) that network
// targets call: the binary in three processes, or with -in-process the
// in-process cluster. Only "limitnode" runs as processes: the other kinds
// need settings the binary has no flag for (unavailable refuses their
// targets without -in-process).
func (e *environment) netCluster(kind string) (netCluster, error) {
	if e.opts.inProcess {
		return inProcessCluster{e.cluster(kind)}, nil
	}
	if kind != "limitnode" {
		return nil, fmt.Errorf("a %s cluster runs only with -in-process", kind)
	}
	if e.processes != nil {
		return e.processes, nil
	}
	binary, err := e.limitnodeBinary()
	if err != nil {
		return nil, err
	}
	c, err := startProcessCluster(binary, nodeFlags{noSync: e.opts.noSync, pprof: e.opts.nodeProfiles != ""}, e.http)
	if err != nil {
		return nil, err
	}
	e.processes = c
	e.closers = append(e.closers, func() { c.stop(); e.processes = nil })
	if e.opts.preload > 0 {
		leader, err := c.leader()
		if err != nil {
			return nil, err
		}
		if err := e.preloadHTTP(leader.URL()); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// limitnodeBinary is -limitnode-binary, or the binary built from this
// tree once per run into a temporary directory.
func (e *environment) limitnodeBinary() (string, error) {
	if e.opts.limitnodeBinary != "" {
		return e.opts.limitnodeBinary, nil
	}
	if e.builtBinary != "" {
		return e.builtBinary, nil
	}
	dir, err := os.MkdirTemp("", "limitbench-bin-")
	if err != nil {
		return "", err
	}
	e.closers = append(e.closers, func() { os.RemoveAll(dir); e.builtBinary = "" })
	path, err := buildLimitnode(dir)
	if err != nil {
		return "", err
	}
	e.builtBinary = path
	return path, nil
}

// preloadHTTP puts opts.preload idle-proof keys (a limit of one a day, so
// they stay live) into the cluster at url, 1,000 per POST /v1/allow/batch.
func (e *environment) preloadHTTP(url string) error {
	for first := 0; first < e.opts.preload; first += 1000 {
		var b strings.Builder
		b.WriteString(`{"requests":[`)
		for i := first; i < first+1000 && i < e.opts.preload; i++ {
			if i > first {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"key":"preload-%d","limit":{"rate":1,"period":"24h","burst":1}}`, i)
		}
		b.WriteString(`]}`)
		if err := e.preloadBatch(url, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// preloadBatch sends one batch of preload keys, again while the cluster
// answers 503 (an election on a loaded machine), for at most a minute:
// preloading fills state, so a batch sent twice only spends its keys'
// one unit again.
func (e *environment) preloadBatch(url, body string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/allow/batch", strings.NewReader(body))
		if err != nil {
			cancel()
			return err
		}
		resp, err := e.http.Do(req)
		cancel()
		if err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return nil
		case resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline):
			return fmt.Errorf("preload: status %d", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
