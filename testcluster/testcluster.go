// Package testcluster starts real limitnode clusters inside one test process:
// N nodes, each with its Raft, HTTP and gRPC listeners on 127.0.0.1 at ports
// the OS picks and the cluster holds to the end of the test, state in
// t.TempDir(). It can kill a node abruptly, restart it from its data
// directory on its ports, and stop everything at the end of the test.
//
// Set LIMITNODE_TEST_LOG=debug (or info, warn) to see the nodes' logs on
// stderr.
package testcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/grpcapi"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/internal/testhooks"

	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/httpapi"
)

// WaitTimeout bounds every wait of this package (for a leader, for a node to
// catch up): testenv.WaitTimeout, which every test's wait shares.
const WaitTimeout = testenv.WaitTimeout

// TB is the part of testing.TB the package uses, so that a benchmark
// program (cmd/limitbench) can start clusters too. *testing.T and
// *testing.B satisfy it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

var _ TB = testing.TB(nil)

// Options adjusts the nodes of a cluster.
type Options struct {
	// Clock, when set, is each node's clock; a test can skew it.
	Clock func() time.Time
	// Configure, when set, may change each node's cluster.Config before
	// it opens.
	Configure func(*cluster.Config)
	// Secure starts every node with mutual TLS on the Raft port, HTTPS
	// and API tokens (Token, CAs, HTTPClient). LIMITNODE_TEST_SECURE=1 in
	// the environment sets it for every cluster.
	Secure bool
}

// Cluster is a set of nodes started by Start.
type Cluster struct {
	t     TB
	opts  Options
	Nodes []*Node
	// Net carries every connection between the nodes; cut or delay its
	// links to inject network faults.
	Net *Network
}

// Node is one member of a test cluster.
type Node struct {
	ID      string
	DataDir string
	// RaftAddr, HTTPAddr and GRPCAddr (its gRPC API, Envoy's rate limit
	// service) are ports the cluster holds from its start to the end of
	// the test (testenv.HoldPort): a restarted node comes back where the
	// others and the test's clients expect it, and no other process can
	// take one of its ports while it is down (a connection is then reset,
	// as at a port nothing listens on).
	RaftAddr string
	HTTPAddr string
	GRPCAddr string

	raftPort, httpPort, grpcPort *testenv.Port

	c          *Cluster
	mu         sync.Mutex
	node       *cluster.Node
	server     *http.Server
	grpcServer *grpcapi.Server
	running    bool
	skewNanos  atomic.Int64
}

// SetClockSkew makes the node's clock run d ahead (or, negative, behind)
// the cluster's base clock, from now on and across restarts.
func (n *Node) SetClockSkew(d time.Duration) { n.skewNanos.Store(int64(d)) }

func (n *Node) clock() time.Time {
	base := time.Now
	if n.c.opts.Clock != nil {
		base = n.c.opts.Clock
	}
	return base().Add(time.Duration(n.skewNanos.Load()))
}

// Start starts a cluster of size nodes named n1, n2, ...: n1 bootstraps, the
// others join through it, and Start returns once every node knows the same
// leader and all members. The cluster is stopped when the test ends.
func Start(t TB, size int, opts ...Options) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Net: newNetwork()}
	if len(opts) > 0 {
		c.opts = opts[0]
	}
	c.opts.Secure = c.opts.Secure || secureFromEnv()
	for i := range size {
		n := &Node{ID: fmt.Sprintf("n%d", i+1), DataDir: t.TempDir(), c: c,
			raftPort: testenv.HoldPort(t), httpPort: testenv.HoldPort(t), grpcPort: testenv.HoldPort(t)}
		n.RaftAddr, n.HTTPAddr, n.GRPCAddr = n.raftPort.Addr(), n.httpPort.Addr(), n.grpcPort.Addr()
		c.Nodes = append(c.Nodes, n)
	}
	// Clean-ups run last registered first: the nodes must stop before
	// their data directories are removed.
	t.Cleanup(c.StopAll)
	for i, n := range c.Nodes {
		if err := n.start(i == 0); err != nil {
			t.Fatalf("testcluster: start %s: %v", n.ID, err)
		}
		if i == 0 {
			c.WaitLeader()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
		err := c.Nodes[0].Node().Join(ctx, contract.Member{ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr}, contract.MemberChange{})
		cancel()
		if err != nil {
			t.Fatalf("testcluster: join %s: %v", n.ID, err)
		}
	}
	c.WaitConverged()
	return c
}

func (n *Node) start(bootstrap bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running {
		return errors.New("already running")
	}
	raftListener, err := n.raftPort.Listener()
	if err != nil {
		return err
	}
	httpListener, err := n.httpPort.Listener()
	if err != nil {
		raftListener.Close()
		return err
	}
	grpcListener, err := n.grpcPort.Listener()
	if err != nil {
		raftListener.Close()
		httpListener.Close()
		return err
	}
	cfg := cluster.Config{
		ID:           n.ID,
		RaftListener: raftListener,
		HTTPAddr:     n.HTTPAddr,
		DataDir:      n.DataDir,
		Bootstrap:    bootstrap,
		Logger:       testLogger().With("test_node", n.ID),
		Clock:        n.clock,
		Dial:         n.c.Net.dialer(n.ID),
	}
	if lvl := os.Getenv("LIMITNODE_TEST_LOG"); lvl != "" {
		cfg.RaftLogLevel = lvl
	}
	apiOpts := httpapi.Options{Logger: cfg.Logger}
	grpcOpts := grpcapi.Options{Logger: cfg.Logger}
	if n.c.opts.Secure {
		cfg.NodeTLS = testMaterial().nodeTLS(n.ID)
		apiOpts.Authorizer, grpcOpts.Authorizer = testMaterial().authz, testMaterial().authz
		grpcOpts.TLS = testMaterial().serverTLS(n.ID)
	}
	if n.c.opts.Configure != nil {
		n.c.opts.Configure(&cfg)
	}
	node, err := cluster.Open(cfg) // closes raftListener if it fails
	if err != nil {
		httpListener.Close()
		grpcListener.Close()
		return err
	}
	n.node = node
	n.c.Net.register(n.ID, n.RaftAddr)
	n.grpcServer = grpcapi.New(node, grpcOpts)
	grpcServer := n.grpcServer
	go func() { _ = grpcServer.Serve(grpcListener) }()
	apiOpts.Collectors = append(grpcServer.Collectors(), node.Collectors()...)
	n.server = httpapi.NewServer(n.HTTPAddr, httpapi.New(node, apiOpts))
	server := n.server
	if n.c.opts.Secure {
		server.TLSConfig = testMaterial().serverTLS(n.ID)
		go func() { _ = server.ServeTLS(httpListener, "", "") }()
	} else {
		go func() { _ = server.Serve(httpListener) }()
	}
	n.running = true
	return nil
}

func testLogger() *slog.Logger {
	lvl := os.Getenv("LIMITNODE_TEST_LOG")
	if lvl == "" {
		return slog.New(slog.DiscardHandler)
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(lvl))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Node returns the running cluster.Node (nil while the node is down).
func (n *Node) Node() *cluster.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running {
		return nil
	}
	return n.node
}

// Running reports whether the node is up.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.running
}

// URL returns the base URL of the node's HTTP API: https:// for a secure
// cluster.
func (n *Node) URL() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c.opts.Secure {
		return "https://" + n.HTTPAddr
	}
	return "http://" + n.HTTPAddr
}

// Kill stops the node abruptly: its HTTP server closes its connections and
// the node stops without handing over leadership, as in a crash.
func (n *Node) Kill() {
	n.stop(false)
}

// Stop stops the node cleanly, handing over leadership if it leads.
func (n *Node) Stop() {
	n.stop(true)
}

func (n *Node) stop(clean bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running {
		return
	}
	n.running = false
	if clean {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = n.server.Shutdown(ctx)
		cancel()
		n.grpcServer.GracefulStop()
		if err := n.node.Close(); err != nil {
			n.c.t.Logf("testcluster: close %s: %v", n.ID, err)
		}
		return
	}
	_ = n.server.Close()
	n.grpcServer.Stop()
	if err := testhooks.AbortNode(n.node); err != nil {
		n.c.t.Logf("testcluster: abort %s: %v", n.ID, err)
	}
}

// Restart starts a stopped node again from its data directory, on its
// ports (which the cluster held while it was down).
func (n *Node) Restart() {
	n.c.t.Helper()
	if err := n.start(false); err != nil {
		n.c.t.Fatalf("testcluster: restart %s: %v", n.ID, err)
	}
}

// StopAll kills every running node. It is registered with t.Cleanup.
func (c *Cluster) StopAll() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(n.Kill)
	}
	wg.Wait()
}

// Running returns the nodes that are up.
func (c *Cluster) Running() []*Node {
	var up []*Node
	for _, n := range c.Nodes {
		if n.Running() {
			up = append(up, n)
		}
	}
	return up
}

// WaitLeader waits until every running node names the same leader, which
// is itself running, and returns it.
func (c *Cluster) WaitLeader() *Node {
	c.t.Helper()
	var leader *Node
	c.waitFor("a leader known to every running node", func() bool {
		leader = c.agreedLeader()
		return leader != nil
	})
	return leader
}

// WaitConverged waits until every running node knows the same leader, sees
// every node as a member, and has applied everything the leader had
// committed when it looked.
func (c *Cluster) WaitConverged() {
	c.t.Helper()
	c.waitFor("the cluster to converge", func() bool {
		leader := c.agreedLeader()
		if leader == nil {
			return false
		}
		leaderNode := leader.Node()
		if leaderNode == nil {
			return false
		}
		// A follower learns the commit index from the leader, so its own
		// view can say "caught up" before it is: compare with the leader's.
		committed := leaderNode.Status().CommitIndex
		for _, n := range c.Running() {
			node := n.Node()
			if node == nil {
				return false
			}
			st := node.Status()
			if len(st.Members) != len(c.Nodes) || st.AppliedIndex < committed {
				return false
			}
		}
		return true
	})
}

func (c *Cluster) agreedLeader() *Node {
	leaderID := ""
	for _, n := range c.Running() {
		node := n.Node()
		if node == nil {
			return nil
		}
		id := node.Status().LeaderID
		if id == "" || (leaderID != "" && id != leaderID) {
			return nil
		}
		leaderID = id
	}
	for _, n := range c.Running() {
		if n.ID == leaderID {
			if node := n.Node(); node != nil && node.IsLeader() {
				return n
			}
		}
	}
	return nil
}

// Isolate cuts every link to and from the node, both ways: to the rest of
// the cluster it looks paused or partitioned away, while clients can still
// reach its HTTP API. Net.HealAll undoes it.
func (c *Cluster) Isolate(n *Node) {
	var others []string
	for _, o := range c.Nodes {
		if o != n {
			others = append(others, o.ID)
		}
	}
	c.Net.Partition([]string{n.ID}, others)
}

// Followers returns the running nodes that are not the leader.
func (c *Cluster) Followers() []*Node {
	c.t.Helper()
	leader := c.WaitLeader()
	var out []*Node
	for _, n := range c.Running() {
		if n != leader {
			out = append(out, n)
		}
	}
	return out
}

func (c *Cluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	testenv.WaitFor(c.t, "testcluster: "+what, cond)
}

// RestartWithoutData starts a stopped node again at the same addresses on
// an empty data directory, forming a cluster of its own: what a node whose
// data directory was lost does when it is started without -join.
func (n *Node) RestartWithoutData() {
	n.c.t.Helper()
	n.DataDir = n.c.t.TempDir()
	if err := n.start(true); err != nil {
		n.c.t.Fatalf("testcluster: restart %s without data: %v", n.ID, err)
	}
}
