package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The cluster targets run by default against limitnode as its users run
// it: the binary, built from this tree, in three processes started with
// README.md's flags for a three-node cluster on one box (every node
// -bootstrap-expect 3 and -join naming all three), plus -grpc for Envoy's
// service as docs/envoy.md adds it.

// limitnodePackage is the binary's package, built from the module the
// tool runs in.
const limitnodePackage = "github.com/limitnode/limitnode/cmd/limitnode"

// clusterStartTimeout bounds how long the three processes may take to
// form their cluster and elect a leader, on a loaded machine.
const clusterStartTimeout = 2 * time.Minute

// portAttempts is how many times a cluster is started on fresh ports when
// a node finds one of its ports taken (another program took it between
// freeAddrs and the node's start).
const portAttempts = 3

// buildLimitnode builds the binary from the module in the working
// directory into dir, and returns its path.
func buildLimitnode(dir string) (string, error) {
	path := filepath.Join(dir, "limitnode")
	out, err := exec.Command("go", "build", "-o", path, limitnodePackage).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s (run limitbench inside the limitnode module, or give -limitnode-binary): %w\n%s", limitnodePackage, err, out)
	}
	return path, nil
}

// freeAddrs returns n distinct loopback addresses that were free a moment
// ago: each listener stays open until all n are chosen.
//
// The binary cannot yet listen on port 0 and report the address it got;
// once it has -addr-file, start the nodes on 127.0.0.1:0 and read their
// addresses back instead.
func freeAddrs(n int) ([]string, error) {
	var addrs []string
	var listeners []net.Listener
	defer func() {
		for _, ln := range listeners {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		listeners = append(listeners, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// processNode is one limitnode process.
type processNode struct {
	id                           string
	httpAddr, raftAddr, grpcAddr string
	logPath                      string
	cmd                          *exec.Cmd
	exited                       chan struct{}
	waitErr                      error // why it exited, once exited is closed
	mu                           sync.Mutex
	conns                        []*grpc.ClientConn
}

func (n *processNode) URL() string { return "http://" + n.httpAddr }

// DialGRPC connects to the node's gRPC API in plaintext, as a client of
// the README's cluster does; the cluster closes the connection when it
// stops.
func (n *processNode) DialGRPC() *grpc.ClientConn {
	conn, err := grpc.NewClient(n.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		// NewClient fails only on a malformed target or option: a bug here.
		panic(fmt.Sprintf("dial gRPC of %s: %v", n.id, err))
	}
	n.mu.Lock()
	n.conns = append(n.conns, conn)
	n.mu.Unlock()
	return conn
}

// nodeFlags are the flags limitbench adds to README.md's when asked.
type nodeFlags struct {
	noSync bool // -no-sync
	pprof  bool // -pprof, for -node-profiles
}

// args are the node's flags: README.md's, with -grpc (and those of flags
// asked for); -data is relative to the cluster's directory, as d1 d2 d3
// are to the README's.
func (n *processNode) args(peers []string, dataDir string, flags nodeFlags) []string {
	args := []string{"-id", n.id, "-http", n.httpAddr, "-raft", n.raftAddr, "-grpc", n.grpcAddr,
		"-data", dataDir, "-bootstrap-expect", "3", "-join", strings.Join(peers, ",")}
	if flags.noSync {
		args = append(args, "-no-sync")
	}
	if flags.pprof {
		args = append(args, "-pprof")
	}
	return args
}

// logTail is the end of the node's log, for an error.
func (n *processNode) logTail() string {
	data, err := os.ReadFile(n.logPath)
	if err != nil {
		return err.Error()
	}
	const tailBytes = 2000
	if len(data) > tailBytes {
		data = data[len(data)-tailBytes:]
	}
	return strings.TrimSpace(string(data))
}

// processCluster is three limitnode processes forming one cluster.
type processCluster struct {
	dir   string
	nodes []*processNode
	http  *http.Client
}

var _ netCluster = (*processCluster)(nil)

// errPortTaken is a node that could not listen on an address freeAddrs chose.
var errPortTaken = errors.New("a port was taken")

// startProcessCluster starts binary as a three-node cluster in a
// temporary directory, and returns once every node is ready and all agree
// on a leader.
func startProcessCluster(binary string, flags nodeFlags, client *http.Client) (*processCluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := tryProcessCluster(binary, flags, client)
		if err == nil {
			return c, nil
		}
		if attempt == portAttempts || !errors.Is(err, errPortTaken) {
			return nil, err
		}
	}
}

func tryProcessCluster(binary string, flags nodeFlags, client *http.Client) (*processCluster, error) {
	dir, err := os.MkdirTemp("", "limitbench-cluster-")
	if err != nil {
		return nil, err
	}
	c := &processCluster{dir: dir, http: client}
	addrs, err := freeAddrs(9)
	if err != nil {
		c.stop()
		return nil, err
	}
	var peers []string
	for i := range 3 {
		id := "n" + strconv.Itoa(i+1)
		c.nodes = append(c.nodes, &processNode{id: id, httpAddr: addrs[3*i], raftAddr: addrs[3*i+1], grpcAddr: addrs[3*i+2],
			logPath: filepath.Join(dir, id+".log"), exited: make(chan struct{})})
		peers = append(peers, addrs[3*i])
	}
	for i, n := range c.nodes {
		if err := c.startNode(binary, n, n.args(peers, "d"+strconv.Itoa(i+1), flags)); err != nil {
			c.stop()
			return nil, err
		}
	}
	if err := c.waitFormed(); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// startNode starts n's process with its output in its log.
func (c *processCluster) startNode(binary string, n *processNode, args []string) error {
	logFile, err := os.Create(n.logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	n.cmd = exec.Command(binary, args...)
	n.cmd.Dir, n.cmd.Stdout, n.cmd.Stderr = c.dir, logFile, logFile
	if err := n.cmd.Start(); err != nil {
		n.cmd = nil
		return fmt.Errorf("start %s: %w", binary, err)
	}
	go func() {
		n.waitErr = n.cmd.Wait()
		close(n.exited)
	}()
	return nil
}

// waitFormed waits until every node's /readyz answers 200 and every node
// names the same leader, and says why not when a node exits or the time
// runs out.
func (c *processCluster) waitFormed() error {
	deadline := time.Now().Add(clusterStartTimeout)
	for {
		for _, n := range c.nodes {
			select {
			case <-n.exited:
				tail := n.logTail()
				err := fmt.Errorf("node %s exited: %v; its log ends:\n%s", n.id, n.waitErr, tail)
				if strings.Contains(tail, "address already in use") {
					err = fmt.Errorf("%w: %w", errPortTaken, err)
				}
				return err
			default:
			}
		}
		_, why := c.agreedLeader()
		if why == nil {
			if why = c.allReady(); why == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster did not form in %s: %w; n1's log ends:\n%s", clusterStartTimeout, why, c.nodes[0].logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// allReady is nil once every node's /readyz answers 200.
func (c *processCluster) allReady() error {
	for _, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		status, _, err := c.call(ctx, http.MethodGet, n.URL()+"/readyz", "", nil)
		cancel()
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("%s is not ready (%d)", n.id, status)
		}
	}
	return nil
}

// agreedLeader is the leader every node names, or an error while they do
// not agree on one.
func (c *processCluster) agreedLeader() (*processNode, error) {
	var agreed string
	for _, n := range c.nodes {
		leader, err := c.leaderSeenBy(n)
		if err != nil {
			return nil, err
		}
		if leader == "" || (agreed != "" && leader != agreed) {
			return nil, fmt.Errorf("the nodes do not agree on a leader yet")
		}
		agreed = leader
	}
	for _, n := range c.nodes {
		if n.id == agreed {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the leader %q is not one of the cluster's nodes", agreed)
}

// leaderSeenBy is the leader's ID as n's GET /v1/cluster names it.
func (c *processCluster) leaderSeenBy(n *processNode) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	status, body, err := c.call(ctx, http.MethodGet, n.URL()+"/v1/cluster", "", nil)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("GET /v1/cluster on %s: %d %s", n.id, status, body)
	}
	var view wire.Cluster
	if err := json.Unmarshal(body, &view); err != nil {
		return "", fmt.Errorf("GET /v1/cluster on %s: %w", n.id, err)
	}
	return view.Leader, nil
}

// call makes one HTTP call and returns its status and body.
func (c *processCluster) call(ctx context.Context, method, url, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

func (c *processCluster) members() []benchNode {
	out := make([]benchNode, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n
	}
	return out
}

func (c *processCluster) leader() (benchNode, error) {
	n, err := c.agreedLeader()
	if err != nil {
		return nil, err
	}
	return n, nil
}

func (c *processCluster) where() string { return whereProcesses }

// putRLSDomain stores an RLS domain's YAML through the leader's HTTP API,
// as an operator would (PUT /v1/rls/domains/{domain}).
func (c *processCluster) putRLSDomain(name, yaml string) error {
	leader, err := c.agreedLeader()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	status, body, err := c.call(ctx, http.MethodPut, leader.URL()+"/v1/rls/domains/"+name, "application/yaml", []byte(yaml))
	if err != nil {
		return fmt.Errorf("store the %s domain: %w", name, err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("store the %s domain: %d %s", name, status, body)
	}
	return nil
}

// servers are the three processes, the leader named as such (when the
// nodes agree on one now).
func (c *processCluster) servers() []serverProcess {
	leader, _ := c.agreedLeader()
	out := make([]serverProcess, 0, len(c.nodes))
	for _, n := range c.nodes {
		name := n.id
		if n == leader {
			name += " (leader)"
		}
		out = append(out, serverProcess{Name: name, PID: n.cmd.Process.Pid})
	}
	return out
}

// stop ends the processes, closes the connections to them and removes
// their directory; it may be called again.
func (c *processCluster) stop() {
	for _, n := range c.nodes {
		n.mu.Lock()
		for _, conn := range n.conns {
			_ = conn.Close()
		}
		n.conns = nil
		n.mu.Unlock()
		if n.cmd != nil {
			// Nothing is kept: no need to wait for a graceful hand-over.
			_ = n.cmd.Process.Kill()
			<-n.exited
			n.cmd = nil
		}
	}
	os.RemoveAll(c.dir)
}
