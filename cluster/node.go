package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/limitnode/limitnode/fsm"
	"go.etcd.io/bbolt"
)

// Errors returned by Node. Raft's own errors never leave this package; each
// is translated into one of these.
var (
	// ErrNoLeader: no leader could be reached before the request's
	// deadline. Nothing was decided; the caller may retry.
	ErrNoLeader = errors.New("cluster: no leader reachable")
	// ErrOutcomeUnknown: the request reached the log but its outcome could
	// not be learnt (leadership was lost, the deadline passed or the leader
	// went away mid-request). It may or may not have consumed; a retry with
	// the same request ID is answered with the first decision.
	ErrOutcomeUnknown = errors.New("cluster: outcome unknown")
	// ErrInvalid: the request was refused as invalid and decided nothing.
	ErrInvalid = errors.New("cluster: invalid request")
	// ErrNotFound: a member to remove is not in the cluster.
	ErrNotFound = errors.New("cluster: no such member")
	// ErrShutdown: the node is shutting down.
	ErrShutdown = errors.New("cluster: node is shut down")
	// ErrKeyLimit: the request would create state for new keys while the
	// cluster already holds Config.MaxKeys of them (and KeyLimitFailOpen
	// is off). Nothing was consumed.
	ErrKeyLimit = errors.New("cluster: key limit reached")

	// errNotLeader: the node asked is not the leader and did nothing, so
	// the request may be sent again to the leader. Never returned to
	// callers: Node retries until its deadline, then returns ErrNoLeader.
	errNotLeader = errors.New("cluster: not the leader")
)

// Defaults for Config's zero values.
const (
	defaultRequestTimeout   = 5 * time.Second
	defaultTransferTimeout  = 3 * time.Second
	defaultMaxBatchRequests = 4096
	// minForwardsInFlight: with one forward at a time, a follower's
	// request waited for the previous forward's round trip and then its
	// own; two cut that wait (HTTP at 64 callers over 3 nodes: +10-17%).
	// More added connections and no speed.
	minForwardsInFlight = 2
	// DefaultMaxKeys caps the live (key, limit) pairs: about 1.2 GB of
	// heap at ~240 bytes each.
	DefaultMaxKeys = 5_000_000
	// Raft timeouts: a leader that stops is noticed after 500ms to 1s
	// (hashicorp/raft randomises between one and two heartbeat timeouts),
	// and a new one is elected a few hundred milliseconds later, so
	// failover takes about a second and a half on one box. Going lower
	// makes a loaded 2-core machine (GC pauses, -race) call spurious
	// elections.
	defaultHeartbeatTimeout = 500 * time.Millisecond
	defaultElectionTimeout  = 500 * time.Millisecond
	defaultLeaderLease      = 250 * time.Millisecond
)

// Config configures a Node. ID, RaftAddr and DataDir are required.
type Config struct {
	// ID names the node in the cluster; unique and stable across restarts.
	ID string
	// RaftAddr is the address Raft listens on and advertises to the other
	// members, for example "127.0.0.1:7071". It must name a host, not
	// 0.0.0.0. Port 0 picks a free port (see Node.RaftAddr); a node that
	// restarts must then be given the port it had.
	RaftAddr string
	// HTTPAddr is the node's HTTP API address as the other members should
	// see it. It is recorded in the replicated state for GET /v1/cluster.
	HTTPAddr string
	// DataDir holds the Raft log, the stable store and snapshots.
	DataDir string
	// SnapshotDir, if set, holds the snapshots (in its snapshots/) instead
	// of DataDir: a snapshot is written and synced whole, and on another
	// disk it does not hold up the log's appends.
	SnapshotDir string
	// Bootstrap makes a node whose DataDir holds no state start a new
	// single-node cluster. Leave it false for a node that will join an
	// existing cluster. A node with state ignores it.
	Bootstrap bool

	// Logger receives the node's logs and Raft's (at RaftLogLevel and
	// above). Nil means slog.Default().
	Logger *slog.Logger
	// RaftLogLevel is the least level of Raft's own logs that reaches
	// Logger: "debug", "info", "warn" (the default) or "error".
	RaftLogLevel string
	// Clock is the wall clock the leader stamps each batch with (within
	// MaxClockStep of the time elapsed since it took over; see clock.go).
	// Nil means time.Now. Tests inject a skewed one.
	Clock func() time.Time
	// MaxClockStep bounds how far the leader's stamp may differ from the
	// cluster time predicted by the real time elapsed since it took over
	// (see clock.go). Default 1s. A test whose Clock is the truth and
	// jumps may set it large.
	MaxClockStep time.Duration
	// Dial opens connections to other nodes' Raft addresses (for Raft and
	// for forwarding). Nil means plain TCP. Tests inject one that can cut,
	// delay or drop links.
	Dial DialFunc

	// RequestTimeout bounds Allow, Join and RemoveMember when their context
	// has no deadline. Default 5s.
	RequestTimeout time.Duration
	// TransferTimeout bounds the hand-over of leadership in Close. Default 3s.
	TransferTimeout time.Duration
	// MaxBatchRequests bounds the requests in one Raft entry. Default 4096.
	MaxBatchRequests int
	// MaxEntriesInFlight is how many group-commit entries may be under way
	// at once on the leader. Default 1: send at once when idle, gather
	// while one is in flight. A follower forwards up to
	// max(MaxEntriesInFlight, 2) batches at once, so its requests reach the
	// leader's next entry instead of waiting for the previous forward's
	// whole round trip. With MaxBatchRequests 1 and a large value here,
	// every request is its own Raft Apply, which is the "bare Raft"
	// baseline of cmd/limitbench.
	MaxEntriesInFlight int
	// NoSync skips the fsync of the Raft log on every append (bbolt's
	// NoSync). Decisions are then acknowledged once a quorum holds them in
	// memory and in the OS page cache: a crash of the limitnode processes
	// loses nothing, and neither does the loss of a minority of machines,
	// but a power failure or kernel crash of a majority at once can lose
	// the last acknowledged decisions (tokens spent then come back). The
	// default, false, fsyncs every append on every node.
	NoSync bool
	// MaxKeys caps the live (key, limit) pairs the cluster keeps, so that a
	// flood of distinct keys cannot exhaust memory. Default DefaultMaxKeys;
	// negative means no cap. The leader's setting applies (it travels in
	// each Raft entry), so give every node the same.
	MaxKeys int64
	// KeyLimitFailOpen chooses what happens to a request that needs a new
	// key once MaxKeys are live: false (the default) refuses it with
	// ErrKeyLimit; true admits it without recording it, so new keys go
	// unlimited until room frees up.
	KeyLimitFailOpen bool
	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout are Raft's;
	// defaults 500ms, 500ms and 250ms.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// SnapshotThreshold and SnapshotInterval are Raft's: a snapshot is taken
	// when that many entries have been applied since the last, checked at
	// that interval. Defaults 8192 and 30s.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// TrailingLogs is how many entries Raft keeps after a snapshot, so a
	// follower that is slightly behind catches up from the log rather
	// than from a whole snapshot. Default 4096.
	TrailingLogs uint64
}

// Member is one member of the cluster as the HTTP API names it.
type Member struct {
	ID       string
	RaftAddr string
	HTTPAddr string
}

// Node is one limitnode cluster member. It decides requests against the
// limits shared by the cluster: as the leader by appending them to the Raft
// log, as a follower by forwarding them to the leader.
type Node struct {
	cfg            Config
	logger         *slog.Logger
	requestTimeout time.Duration

	raft      *raft.Raft
	fsm       *fsm.FSM
	logStore  *raftboltdb.BoltStore
	transport *raft.NetworkTransport
	mux       *mux
	advertise string
	hadState  bool

	clock         *clusterClock
	barrierTerm   atomic.Uint64 // the term in which this node last ran a barrier as leader
	leaderBatch   *batcher
	followerBatch *batcher
	fwd           *forwarder

	connsMu sync.Mutex
	conns   map[net.Conn]struct{}

	stopCh    chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open starts a node: it opens (or creates) the stores under DataDir, starts
// Raft on RaftAddr and, if Bootstrap is set and there is no state yet,
// bootstraps a single-node cluster. A node with state rejoins the cluster it
// belonged to. The node serves until Close.
func Open(cfg Config) (*Node, error) {
	if cfg.ID == "" || cfg.RaftAddr == "" || cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: ID, RaftAddr and DataDir are required", ErrInvalid)
	}
	cfg = withDefaults(cfg)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: create data directory: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, fmt.Errorf("cluster: listen for raft on %s: %w", cfg.RaftAddr, err)
	}
	tcpAddr, ok := ln.Addr().(*net.TCPAddr)
	if !ok || tcpAddr.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("%w: raft address %s must name a host the other members can reach, not 0.0.0.0", ErrInvalid, cfg.RaftAddr)
	}

	n := &Node{
		cfg:            cfg,
		logger:         cfg.Logger.With("node", cfg.ID),
		requestTimeout: cfg.RequestTimeout,
		advertise:      tcpAddr.String(),
		conns:          make(map[net.Conn]struct{}),
		stopCh:         make(chan struct{}),
		fwd:            newForwarder(cfg.Dial, cfg.RequestTimeout),
	}
	n.mux = newMux(ln, n.logger, protocolRaft, protocolForward)
	if err := n.startRaft(); err != nil {
		n.mux.close()
		return nil, err
	}
	n.leaderBatch = newBatcher(n.applyBatch, cfg.MaxBatchRequests, cfg.MaxEntriesInFlight, gatherYields)
	n.followerBatch = newBatcher(n.forwardBatch, cfg.MaxBatchRequests, max(cfg.MaxEntriesInFlight, minForwardsInFlight), gatherYields)
	n.wg.Go(func() { n.serveForwarding(n.mux.listener(protocolForward)) })
	n.wg.Go(n.watchLeadership)
	return n, nil
}

func withDefaults(cfg Config) Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Dial == nil {
		cfg.Dial = dialTCP
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.MaxClockStep <= 0 {
		cfg.MaxClockStep = DefaultMaxClockStep
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = defaultRequestTimeout
	}
	if cfg.TransferTimeout <= 0 {
		cfg.TransferTimeout = defaultTransferTimeout
	}
	if cfg.SnapshotDir == "" {
		cfg.SnapshotDir = cfg.DataDir
	}
	if cfg.MaxBatchRequests <= 0 {
		cfg.MaxBatchRequests = defaultMaxBatchRequests
	}
	if cfg.MaxEntriesInFlight <= 0 {
		cfg.MaxEntriesInFlight = 1
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = defaultHeartbeatTimeout
	}
	if cfg.ElectionTimeout <= 0 {
		cfg.ElectionTimeout = defaultElectionTimeout
	}
	if cfg.LeaderLeaseTimeout <= 0 {
		cfg.LeaderLeaseTimeout = min(defaultLeaderLease, cfg.HeartbeatTimeout)
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 8192
	}
	if cfg.SnapshotInterval <= 0 {
		cfg.SnapshotInterval = 30 * time.Second
	}
	if cfg.TrailingLogs == 0 {
		// The FSM's snapshot is small next to the log; keeping fewer
		// trailing entries than Raft's 10240 keeps raft.db smaller.
		cfg.TrailingLogs = 4096
	}
	return cfg
}

func (n *Node) startRaft() error {
	hlog := newRaftLogger(n.logger, n.cfg.RaftLogLevel)
	logStore, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(n.cfg.DataDir, "raft.db"),
		// bbolt waits forever for the file lock by default; a second
		// process on the same directory must fail instead.
		BoltOptions: &bbolt.Options{Timeout: time.Second},
		NoSync:      n.cfg.NoSync,
	})
	if err != nil {
		return fmt.Errorf("cluster: open raft log in %s: %w", n.cfg.DataDir, err)
	}
	fileSnapshots, err := raft.NewFileSnapshotStoreWithLogger(n.cfg.SnapshotDir, 2, hlog)
	if err != nil {
		logStore.Close()
		return fmt.Errorf("cluster: open snapshot store in %s: %w", n.cfg.SnapshotDir, err)
	}
	snapshots := newPacedSnapshotStore(n.cfg.SnapshotDir, fileSnapshots)
	hasState, err := raft.HasExistingState(logStore, logStore, snapshots)
	if err != nil {
		logStore.Close()
		return fmt.Errorf("cluster: inspect existing state: %w", err)
	}
	transport := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &raftStream{Listener: n.mux.listener(protocolRaft), advertise: n.mux.ln.Addr(), dial: n.cfg.Dial},
		MaxPool: 5,
		Timeout: 10 * time.Second,
		Logger:  hlog,
	})

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	rc.Logger = hlog
	rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	rc.ElectionTimeout = n.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	rc.SnapshotInterval = n.cfg.SnapshotInterval
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.TrailingLogs = n.cfg.TrailingLogs

	startupIndex, err := logStore.LastIndex()
	if err != nil {
		logStore.Close()
		return fmt.Errorf("cluster: read the log's last index: %w", err)
	}
	n.clock = &clusterClock{wall: n.cfg.Clock, step: n.cfg.MaxClockStep, startupIndex: startupIndex}
	n.fsm = fsm.New(n.logger)
	n.fsm.OnStampApplied(n.clock.observe)
	r, err := raft.NewRaft(rc, n.fsm, logStore, logStore, snapshots, transport)
	if err != nil {
		transport.Close()
		logStore.Close()
		return fmt.Errorf("cluster: start raft: %w", err)
	}
	if !hasState && n.cfg.Bootstrap {
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: transport.LocalAddr(),
		}}}
		if err := r.BootstrapCluster(boot).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			r.Shutdown()
			transport.Close()
			logStore.Close()
			return fmt.Errorf("cluster: bootstrap: %w", err)
		}
		n.logger.Info("bootstrapped a new single-node cluster", "raft_addr", n.advertise)
	}
	n.raft, n.logStore, n.transport, n.hadState = r, logStore, transport, hasState
	return nil
}

// RaftAddr returns the address Raft listens on and advertises.
func (n *Node) RaftAddr() string { return n.advertise }

// HadState reports whether DataDir held Raft state when the node opened: the
// node then restarted into the cluster it belonged to, and needs no join.
func (n *Node) HadState() bool { return n.hadState }

// ID returns the node's ID.
func (n *Node) ID() string { return n.cfg.ID }

func (n *Node) isLeader() bool { return n.raft.State() == raft.Leader }

// withDeadline gives ctx the node's request timeout unless it has a deadline.
func (n *Node) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, n.requestTimeout)
}

// decide sends requests through the leader's group commit, locally or by
// forwarding, and retries only where nothing can have been applied.
func (n *Node) decide(ctx context.Context, reqs []fsm.Request) ([]fsm.Result, string, error) {
	ctx, cancel := n.withDeadline(ctx)
	defer cancel()
	backoff := 2 * time.Millisecond
	for {
		var results []fsm.Result
		var leader string
		var err error
		if n.isLeader() {
			results, leader, err = n.leaderBatch.submit(ctx, reqs)
		} else {
			results, leader, err = n.followerBatch.submit(ctx, reqs)
		}
		if !errors.Is(err, errNotLeader) {
			return results, leader, err
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, "", ErrNoLeader
		case <-n.stopCh:
			timer.Stop()
			return nil, "", ErrShutdown
		case <-timer.C:
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// applyBatch is the leader's flush: one Raft entry for all the calls.
func (n *Node) applyBatch(calls []*call) {
	reqs := concatRequests(calls)
	stamp, err := n.leaderStamp()
	if err != nil {
		failAll(calls, err) // nothing of the batch was appended
		return
	}
	data, err := fsm.Encode(fsm.CommandAllow, &fsm.AllowCommand{
		NowNanos: stamp, Requests: reqs, MaxKeys: max(n.cfg.MaxKeys, 0), KeyLimitFailOpen: n.cfg.KeyLimitFailOpen,
	})
	if err != nil {
		failAll(calls, err)
		return
	}
	future := n.raft.Apply(data, n.requestTimeout)
	if err := future.Error(); err != nil {
		if notApplied(err) {
			failAll(calls, errNotLeader)
		} else {
			failAmbiguous(calls, err)
		}
		return
	}
	switch resp := future.Response().(type) {
	case *fsm.Response:
		distribute(calls, resp.Results, n.cfg.ID)
	case error:
		failAll(calls, fmt.Errorf("cluster: apply: %w", resp))
	default:
		failAll(calls, fmt.Errorf("cluster: apply returned %T", resp))
	}
}

// leaderStamp returns the time to stamp on an entry this leader appends.
// A new leader first applies everything earlier leaders committed (a
// barrier), so its clock starts from the latest cluster time (clock.go).
// Its errors mean nothing was appended: errNotLeader or ErrShutdown.
func (n *Node) leaderStamp() (int64, error) {
	term := n.raft.CurrentTerm()
	if n.barrierTerm.Load() != term {
		if err := n.raft.Barrier(n.requestTimeout).Error(); err != nil {
			if errors.Is(err, raft.ErrRaftShutdown) {
				return 0, ErrShutdown
			}
			return 0, errNotLeader
		}
		n.barrierTerm.Store(term)
	}
	return n.clock.stamp(term, n.fsm.Now()), nil
}

// forwardBatch is a follower's flush: one message to the leader for all the
// calls.
func (n *Node) forwardBatch(calls []*call) {
	addr, id := n.raft.LeaderWithID()
	if addr == "" || string(id) == n.cfg.ID {
		failAll(calls, errNotLeader)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.requestTimeout)
	defer cancel()
	resp, err := n.fwd.send(ctx, string(addr), &forwardRequest{Op: opAllow, Requests: concatRequests(calls)})
	switch {
	case errors.Is(err, errNotSent):
		failAll(calls, errNotLeader)
	case err != nil:
		failAmbiguous(calls, err)
	case resp.Status == statusUnknown:
		failAmbiguous(calls, errorFor(resp))
	case resp.Status != statusOK:
		failAll(calls, errorFor(resp))
	default:
		distribute(calls, resp.Results, string(id))
	}
}

// notApplied reports whether a Raft apply error guarantees that the entry
// was never appended, so the request may go to another leader.
func notApplied(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		errors.Is(err, raft.ErrEnqueueTimeout)
}

func concatRequests(calls []*call) []fsm.Request {
	if len(calls) == 1 {
		return calls[0].requests
	}
	size := 0
	for _, c := range calls {
		size += len(c.requests)
	}
	reqs := make([]fsm.Request, 0, size)
	for _, c := range calls {
		reqs = append(reqs, c.requests...)
	}
	return reqs
}

func distribute(calls []*call, results []fsm.Result, leader string) {
	if len(results) != len(concatRequests(calls)) {
		failAll(calls, fmt.Errorf("cluster: %d results for %d requests", len(results), len(concatRequests(calls))))
		return
	}
	for _, c := range calls {
		c.results, results = results[:len(c.requests):len(c.requests)], results[len(c.requests):]
		c.leader = leader
	}
}

func failAll(calls []*call, err error) {
	for _, c := range calls {
		c.err = err
	}
}

// failAmbiguous answers calls whose outcome is unknown. A call whose every
// request carries an ID is safe to send again, since the FSM answers a
// repeated ID with its first result; the others get ErrOutcomeUnknown.
func failAmbiguous(calls []*call, cause error) {
	for _, c := range calls {
		c.err = fmt.Errorf("%w: %w", ErrOutcomeUnknown, cause)
		if allHaveIDs(c.requests) {
			c.err = errNotLeader
		}
	}
}

func allHaveIDs(reqs []fsm.Request) bool {
	for _, r := range reqs {
		if r.RequestID == "" {
			return false
		}
	}
	return true
}

func (n *Node) trackConn(c net.Conn, add bool) {
	n.connsMu.Lock()
	defer n.connsMu.Unlock()
	if add {
		n.conns[c] = struct{}{}
	} else {
		delete(n.conns, c)
	}
}

// watchLeadership reacts to changes of leader: it drops pooled forwarding
// connections to the old leader and makes sure the replicated state knows
// this node's HTTP address.
func (n *Node) watchLeadership() {
	observations := make(chan raft.Observation, 16)
	observer := raft.NewObserver(observations, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(observer)
	defer n.raft.DeregisterObserver(observer)
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-n.stopCh:
			return
		case <-observations:
		case <-ticker.C:
		}
		addr, _ := n.raft.LeaderWithID()
		n.fwd.dropExcept(string(addr))
		if addr != "" && n.cfg.HTTPAddr != "" && n.fsm.NodeHTTPAddr(n.cfg.ID) != n.cfg.HTTPAddr {
			ctx, cancel := context.WithTimeout(context.Background(), n.requestTimeout)
			if err := n.Join(ctx, Member{ID: n.cfg.ID, RaftAddr: n.advertise, HTTPAddr: n.cfg.HTTPAddr}); err != nil {
				n.logger.Debug("recording this node's HTTP address", "err", err)
			}
			cancel()
		}
	}
}

// Close shuts the node down cleanly: a leader first hands leadership to
// another voter (for at most TransferTimeout), then requests still pending
// fail with ErrShutdown, Raft stops and the stores are closed.
func (n *Node) Close() error { return n.shutdown(true) }

// Abort stops the node at once, as a crash would as far as the cluster can
// tell: no hand-over of leadership, pending requests fail. Every entry the
// node acknowledged is already on disk, so the node can be reopened from
// its DataDir. Tests use it to kill a node.
func (n *Node) Abort() error { return n.shutdown(false) }

func (n *Node) shutdown(transfer bool) error {
	n.closeOnce.Do(func() {
		if transfer && n.isLeader() && n.otherVoters() > 0 {
			n.transferLeadership()
		}
		close(n.stopCh)
		n.leaderBatch.stop()
		n.followerBatch.stop()
		var errs []error
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
		}
		n.mux.close()
		n.connsMu.Lock()
		for c := range n.conns {
			c.Close()
		}
		n.connsMu.Unlock()
		n.fwd.close()
		n.wg.Wait()
		if err := n.transport.Close(); err != nil {
			errs = append(errs, fmt.Errorf("transport: %w", err))
		}
		if err := n.logStore.Close(); err != nil {
			errs = append(errs, fmt.Errorf("log store: %w", err))
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

func (n *Node) otherVoters() int {
	future := n.raft.GetConfiguration()
	if future.Error() != nil {
		return 0
	}
	count := 0
	for _, s := range future.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			count++
		}
	}
	return count
}

func (n *Node) transferLeadership() {
	done := make(chan error, 1)
	go func() { done <- n.raft.LeadershipTransfer().Error() }()
	select {
	case err := <-done:
		if err != nil {
			n.logger.Warn("leadership transfer failed", "err", err)
		} else {
			n.logger.Info("handed leadership over")
		}
	case <-time.After(n.cfg.TransferTimeout):
		n.logger.Warn("leadership transfer timed out", "after", n.cfg.TransferTimeout)
	}
}
