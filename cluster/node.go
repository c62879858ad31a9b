package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/limitnode/limitnode/cluster/internal/clusterclock"
	"github.com/limitnode/limitnode/cluster/internal/consistency"
	"github.com/limitnode/limitnode/cluster/internal/denylease"
	"github.com/limitnode/limitnode/cluster/internal/health"
	"github.com/limitnode/limitnode/cluster/internal/identity"
	"github.com/limitnode/limitnode/cluster/internal/leasewait"
	"github.com/limitnode/limitnode/cluster/internal/raftlog"
	"github.com/limitnode/limitnode/cluster/internal/raftstore"
	"github.com/limitnode/limitnode/cluster/internal/rafttransport"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/guard"
	"github.com/limitnode/limitnode/internal/transport"
)

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
	transport *rafttransport.GatedTransport
	mux       *transport.Mux
	advertise string
	hadState  bool
	// identity is what the data directory records of this node and its
	// cluster.
	identity *identity.Records
	// members changes the membership and knows whether this node is in
	// it; restorer stages and commits restores (membership.go, backup.go).
	members  *members
	restorer *restorer

	clock   *clusterclock.Clock
	metrics *nodeMetrics
	stats   *recorder
	// answeredHere records what this node answered on its own, from deny
	// leases and shares, which no entry carries (stats.go).
	answeredHere *recorder
	// health is the latest view of the members, progress what the
	// leader's pings said of its applied index, disk what the disk probe
	// found, quorum the voters a node without a leader waits for, and
	// digests this node's checkpoints' digests (cluster/internal/health,
	// cluster/internal/consistency).
	health   *health.View
	progress health.Progress
	disk     *health.Disk
	quorum   health.Quorum
	digests  consistency.Digests
	appends  *raftstore.AppendWatch // the log store, watched for failed appends
	// replica is the node's Raft and state machine as the decision path
	// and the reads use them; route its way to the leader, and commit its
	// way to the leader's log (replica.go, leader.go, groupcommit.go).
	replica *replica
	route   *leaderRoute
	commit  *groupCommit
	// denyLeases are the denials this node answers without asking, nil
	// when they are off; leaseGrants is what, as leader, it knows of the
	// leases it granted, and skipRaiseWait (tests only) breaks the rule
	// that keeps them exact (denylease.go).
	denyLeases    *denylease.Table
	leaseGrants   denylease.Grants
	skipRaiseWait atomic.Bool
	shares        *shareHolder // the shares of keys' budgets this node holds (shares.go)
	fwd           *forwarder
	forwarding    *forwardServer
	// waiters are the lease requests queued on this node's behalf, which
	// leases serves (leases.go).
	waiters *leasewait.Waiters
	leases  *leaseQueues
	// stages are decide's local stages, in order (allow.go).
	stages [2]localStage
	// statistics gathers the decision statistics (stats.go).
	statistics *statistics

	stopCh    chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open starts a node: it opens (or creates) the stores under DataDir, starts
// Raft on RaftListener or RaftAddr and, if Bootstrap is set and there is no state yet,
// bootstraps a single-node cluster. A node with state rejoins the cluster it
// belonged to. The node serves until Close.
func Open(cfg Config) (*Node, error) {
	if cfg.ID == "" || (cfg.RaftAddr == "" && cfg.RaftListener == nil) || cfg.DataDir == "" {
		if cfg.RaftListener != nil {
			cfg.RaftListener.Close()
		}
		return nil, errors.New("cluster: Config.ID, RaftAddr (or RaftListener) and DataDir are required")
	}
	cfg = withDefaults(cfg)
	// Listen first: a node that cannot take its port leaves no empty data
	// directory behind.
	ln := cfg.RaftListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.RaftAddr); err != nil {
			return nil, fmt.Errorf("cluster: listen for raft on %s: %w", cfg.RaftAddr, err)
		}
	}
	advertise, err := advertisedRaftAddr(ln.Addr(), cfg.RaftAdvertise)
	if err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		ln.Close()
		return nil, fmt.Errorf("cluster: create data directory: %w", err)
	}

	n := &Node{
		cfg:            cfg,
		logger:         cfg.Logger.With("node", cfg.ID),
		requestTimeout: cfg.RequestTimeout,
		advertise:      advertise,
		stopCh:         make(chan struct{}),
		metrics:        newNodeMetrics(),
		stats:          newRecorder(),
		answeredHere:   newRecorder(),
		waiters:        leasewait.New(),
		denyLeases:     denylease.New(cfg.DenyLeaseCap, cfg.MaxClockRate, time.Now),
	}
	n.identity = identity.New(cfg.ID, n.logger)
	n.health = health.NewView(cfg.ID, n.logger)
	n.disk = health.NewDisk(cfg.DataDir, n.logger)
	n.fwd = newForwarder(transport.Dialer{Dial: cfg.Dial, TLS: cfg.NodeTLS, Cluster: n.identity.ClusterID}, cfg.RequestTimeout)
	n.mux = transport.NewMux(guard.Wrap(ln, cfg.MaxRaftConns, cfg.RaftIdleTimeout, n.logger), cfg.NodeTLS, n.ClusterID, n.logger, transport.ProtocolRaft, transport.ProtocolForward)
	if err := n.startRaft(); err != nil {
		n.mux.Close()
		n.stats.close()
		n.answeredHere.close()
		return nil, err
	}
	n.replica = &replica{raft: n.raft, fsm: n.fsm, logStore: n.logStore, clock: n.clock, timeout: cfg.RequestTimeout, stop: n.stopCh,
		confirm: &confirmer{verify: func() error { return n.raft.VerifyLeader().Error() }}}
	n.members = &members{raft: n.raft, selfID: cfg.ID, logger: n.logger, dialer: n.fwd.dialer, records: n.identity,
		httpAddrOf: n.fsm.NodeHTTPAddr, apply: n.replica.applyCommand, foreignDialer: n.mux.ForeignDialer}
	n.members.startedAlone.length = holdAloneFor(cfg.HeartbeatTimeout, cfg.ElectionTimeout)
	holdEnds := time.Now().Add(n.members.startedAlone.length)
	n.members.startedAlone.until.Store(&holdEnds)
	n.route = &leaderRoute{self: cfg.ID, replica: n.replica, fwd: n.fwd, refuse: n.members.refuseOutside, holdCommand: n.members.awaitDialers, readWait: n.metrics.readIndex, logger: n.logger,
		applied: func(t fsm.CommandType, result any) {
			if fsm.EffectOf(t, result).Waits() {
				n.waitOutLeases() // the raise rule (denylease.go)
			}
			if lease, ok := result.(*fsm.LeaseResult); ok && (lease.Queued || lease.Waiting > 0) {
				// A queue may now be due sooner: a waiter joined, or a
				// renewal brought forward an expiry a waiter waits for.
				n.leases.kick()
			}
		}}
	n.members.audit = n.route.recordAudit
	n.restorer = &restorer{raft: n.raft, fsm: n.fsm, logger: n.logger, spoolDir: cfg.DataDir, timeout: cfg.RequestTimeout,
		await: n.replica.awaitApplied, apply: n.replica.applyCommand, stamp: n.replica.leaderStamp,
		waitOutLeases: n.waitOutLeases, clusterID: n.identity.ClusterID}
	n.shares = newShareHolder(shareHolder{self: cfg.ID, fsm: n.fsm, route: n.route, decide: n.decideOnLeader, maxClockRate: cfg.MaxClockRate,
		stop: n.stopCh, metrics: n.metrics, logger: n.logger})
	n.stages = [...]localStage{leaseStage{t: n.denyLeases, metrics: n.metrics}, shareStage{h: n.shares}}
	n.statistics = &statistics{route: n.route, stats: n.stats, answeredHere: n.answeredHere}
	n.leases = newLeaseQueues(n.route, n.waiters, n.logger, cfg.MaxLeasesPerCaller)
	n.commit = newGroupCommit(cfg, n.replica, n.fwd, &n.leaseGrants, n.stats, n.metrics)
	n.forwarding = &forwardServer{handle: n.handleForward, logger: n.logger}
	n.startWatchers()
	return n, nil
}

// advertisedRaftAddr is the Raft address the other members are told: flag
// when set (host:port, the host a name or an IP, port 0 for the port
// listened on), else the address listened on, which must then name a host.
func advertisedRaftAddr(listening net.Addr, flag string) (string, error) {
	tcpAddr, ok := listening.(*net.TCPAddr)
	if !ok {
		return "", fmt.Errorf("cluster: raft listens on %s, not a TCP address", listening)
	}
	if flag != "" {
		host, port, err := net.SplitHostPort(flag)
		if err != nil || host == "" || port == "" {
			return "", fmt.Errorf("cluster: raft advertise address %q must be host:port", flag)
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			return "", fmt.Errorf("cluster: raft advertise address %s must name a host the other members can reach, not %s", flag, host)
		}
		if port == "0" {
			return net.JoinHostPort(host, strconv.Itoa(tcpAddr.Port)), nil
		}
		return flag, nil
	}
	if tcpAddr.IP.IsUnspecified() {
		return "", fmt.Errorf("cluster: raft address %s listens on every interface: give the address the other members reach it at (RaftAdvertise)", listening)
	}
	return tcpAddr.String(), nil
}

func (n *Node) startRaft() error {
	hlog := raftlog.New(n.logger, n.cfg.RaftLogLevel)
	stores, err := raftstore.Open(raftstore.Options{
		DataDir: n.cfg.DataDir, SnapshotDir: n.cfg.SnapshotDir, NoSync: n.cfg.NoSync, RaftLogger: hlog, Logger: n.logger,
		SnapshotWritten: func(took time.Duration, bytes int64) {
			n.metrics.snapshot.Observe(took.Seconds())
			n.metrics.snapshotBytes.Set(float64(bytes))
		},
	})
	if err != nil {
		return err
	}
	logStore, snapshots, hasState := stores.Log, stores.Snapshots, stores.HasState
	if err := n.identity.Open(logStore, logStore, snapshots, hasState, n.cfg.DataDir, n.advertise); err != nil {
		logStore.Close()
		return err
	}
	n.logStore = logStore
	startupIndex, err := logStore.LastIndex()
	if err != nil {
		logStore.Close()
		return fmt.Errorf("cluster: read the log's last index: %w", err)
	}
	// The state machine, wired to the node's identity records, checkpoints,
	// lease waiters, deny leases, statistics and clock.
	n.fsm = fsm.New(n.logger)
	n.fsm.OnClusterID(n.identity.Adopt)
	n.fsm.OnCheckpoint(n.digests.OnCheckpoint)
	n.fsm.OnLeaseEvents(n.waiters.Deliver, n.waiters.SignalRestored)
	if n.denyLeases != nil {
		n.fsm.OnRaise(n.denyLeases.Clear)
	}
	n.fsm.OnLocalAnswers(n.leaseGrants.Granted)
	if !n.cfg.NoStats {
		n.fsm.OnAllowApplied(n.stats.record)
	}
	n.clock = clusterclock.New(n.cfg.Clock, n.cfg.MaxClockStep, n.cfg.MaxClockRate, startupIndex, n.fsm.StampCeiling)
	n.fsm.OnStampApplied(n.clock.Observe)
	n.appends = &raftstore.AppendWatch{LogStore: logStore}
	network := newNetwork(&rafttransport.RaftStream{Listener: n.mux.Listener(transport.ProtocolRaft), Advertise: n.advertise, Dialer: n.fwd.dialer}, hlog)
	r, err := raft.NewRaft(raftConfig(n.cfg, hlog), &configWatch{timedFSM: &timedFSM{FSM: n.fsm, restore: n.metrics.restore, apply: n.metrics.apply}, selfID: n.cfg.ID, records: n.identity}, &timedLogStore{LogStore: n.appends, hist: n.metrics.store}, logStore, snapshots, network)
	if err != nil {
		network.Close()
		logStore.Close()
		return fmt.Errorf("cluster: start raft: %w", err)
	}
	if !hasState && n.cfg.Bootstrap {
		if err := bootstrapAlone(r, n.cfg.ID, n.advertise, n.logger); err != nil {
			r.Shutdown()
			network.Close()
			logStore.Close()
			return err
		}
	}
	n.raft, n.transport, n.hadState = r, network, hasState
	if !hasState && n.cfg.Bootstrap {
		n.identity.RecordMember()
		if err := n.identity.SetClusterID(identity.NewClusterID()); err != nil {
			n.logger.Error("recording the new cluster's ID", "err", err)
		}
	}
	return nil
}

// newNetwork is Raft's transport over stream, with heartbeats gated so
// that none reaches Raft once the node stops (rafttransport.GatedTransport).
func newNetwork(stream raft.StreamLayer, hlog hclog.Logger) *rafttransport.GatedTransport {
	return &rafttransport.GatedTransport{NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: 5,
		Timeout: 10 * time.Second,
		Logger:  hlog,
	})}
}

// bootstrapAlone bootstraps r, the Raft of node id at advertise, as a
// single-node cluster; a node that has a configuration already is left as
// it is.
func bootstrapAlone(r *raft.Raft, id, advertise string, logger *slog.Logger) error {
	err := r.BootstrapCluster(firstConfiguration([]contract.Member{{ID: id, RaftAddr: advertise}})).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("cluster: bootstrap: %w", err)
	}
	logger.Info("bootstrapped a new single-node cluster", "raft_addr", advertise)
	return nil
}

// DialFunc opens a TCP connection to another node's Raft address
// (Config.Dial; tests put a network that can fail in between).
type DialFunc = transport.DialFunc

// raftConfig is hashicorp/raft's configuration of a node configured with
// cfg.
func raftConfig(cfg Config, hlog hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.TrailingLogs = cfg.TrailingLogs
	// A removed node keeps Raft running, so that it says why it does not
	// serve and can be joined again without a restart.
	rc.ShutdownOnRemove = false
	return rc
}

// RaftAddr returns the address the other members reach this node's Raft
// port at: Config.RaftAdvertise, or the address listened on.
func (n *Node) RaftAddr() string { return n.advertise }

// HadState reports whether DataDir held Raft state when the node opened: the
// node then restarted into the cluster it belonged to, and needs no join.
func (n *Node) HadState() bool { return n.hadState }

// ClusterID returns the ID of the cluster this node belongs to, or "" while
// it knows none (a node being joined, before the cluster's state reaches
// it).
func (n *Node) ClusterID() string { return n.identity.ClusterID() }

// ID returns the node's ID.
func (n *Node) ID() string { return n.cfg.ID }

// configuration returns the latest configuration r knows.
func configuration(r *raft.Raft) ([]raft.Server, error) {
	future := r.GetConfiguration()
	if err := future.Error(); err != nil {
		return nil, translate(err)
	}
	return future.Configuration().Servers, nil
}

// IsLeader reports whether this node currently believes it is the leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// startWatchers starts the node's background loops, each given what it
// needs.
func (n *Node) startWatchers() {
	n.wg.Go(func() { n.forwarding.serve(n.mux.Listener(transport.ProtocolForward)) })
	n.wg.Go(func() {
		lastLeader := raft.ServerAddress("")
		observeLeadership(n.raft, n.stopCh, func(leaderAddr raft.ServerAddress) {
			if leaderAddr != lastLeader {
				n.metrics.leaderChanges.Inc()
				lastLeader = leaderAddr
			}
			n.followLeadership(leaderAddr)
		})
	})
	n.wg.Go(func() {
		pinger := newForwarder(n.fwd.dialer, health.Every)
		defer pinger.close()
		round := &health.Round{SelfID: n.cfg.ID, Raft: n.raft, View: n.health, Digests: &n.digests, Logger: n.logger, Ping: pingWith(pinger)}
		onEachTick(n.stopCh, health.Every, func() {
			switch _, leader := n.raft.LeaderWithID(); {
			case n.IsLeader():
				n.progress.Clear()
				round.Run()
			case leader == "":
				if servers, err := configuration(n.raft); err == nil {
					n.quorum.Probe(servers, n.members.silent)
				}
			default:
				n.quorum.Clear()
			}
		})
	})
	n.wg.Go(func() {
		n.disk.Probe()
		onEachTick(n.stopCh, health.DiskProbeEvery, n.disk.Probe)
	})
	if n.cfg.ConsistencyCheckEvery >= 0 {
		n.wg.Go(func() {
			onEachTick(n.stopCh, n.cfg.ConsistencyCheckEvery, func() {
				if !n.IsLeader() {
					return
				}
				if _, err := appendCheckpoint(n.raft, n.requestTimeout, n.replica.awaitApplied); err != nil {
					n.logger.Debug("appending a consistency checkpoint", "err", err)
				}
			})
		})
	}
	n.wg.Go(n.leases.watch)
	// The leader appends a tick when cluster time has not moved for long
	// (clusterclock.Clock.TickDue).
	n.wg.Go(func() {
		onEachTick(n.stopCh, time.Second, func() {
			if !n.IsLeader() || !n.clock.TickDue() {
				return
			}
			stamp, err := n.replica.leaderStamp()
			if err == nil {
				err = n.replica.applyCommand(fsm.CommandLeaseTick, &fsm.LeaseTickCommand{NowNanos: stamp})
			}
			if err != nil {
				n.logger.Debug("a time tick not applied", "err", err)
			}
		})
	})
}

// onEachTick calls fn every interval until stop closes. It is the loop of
// the node's background watchers.
func onEachTick(stop <-chan struct{}, every time.Duration, fn func()) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
		fn()
	}
}

// NodeTLS makes a node's Raft port speak mutual TLS: every connection, in
// both directions (Raft, forwarded requests, membership), presents this
// node's certificate and verifies the peer's against the CA that signs every
// member's; plaintext and certificates of another CA are refused. A dialing
// node also checks that the certificate names the address it dialed (an IP
// address or a DNS name in the certificate's subject alternative names).
//
// A node certificate is a member's full credential: whoever holds one that
// the CA signed can take part in Raft (vote, lead, replicate any entry) and
// forward requests. Issue them to the cluster's nodes only.
type NodeTLS = transport.TLS
