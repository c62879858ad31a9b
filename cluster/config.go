package cluster

import (
	"cmp"
	"log/slog"
	"net"
	"time"

	"github.com/limitnode/limitnode/algorithms"

	"github.com/limitnode/limitnode/internal/transport"
)

// DefaultMaxClockStep is how far, by default, a leader's stamp may stray
// from the cluster time that elapsed real time predicts. See cluster/internal/clusterclock.
const DefaultMaxClockStep = time.Second

// DefaultMaxClockRate is how much faster than real time cluster time may
// run by default (Config.MaxClockRate): a leader whose clock is ahead of the
// cluster's catches up at a hundredth of real time, never jumping ahead, so
// a node that times something in cluster time on its own monotonic clock is
// off by at most that fraction.
const DefaultMaxClockRate = 0.01

// Defaults for Config's zero values.
const (
	defaultRequestTimeout   = 5 * time.Second
	defaultTransferTimeout  = 3 * time.Second
	defaultMaxBatchRequests = 4096
	defaultMaxBatchChecks   = 1024
	// maxFlushBytes bounds the estimated size of one Raft entry or
	// forwarded message, under the frame limit of the forwarding protocol.
	maxFlushBytes = transport.MaxFrameBytes / 2
	// DefaultDenyLeaseCap bounds a deny lease, and so how long a command
	// that gives capacity back waits before it is acknowledged.
	DefaultDenyLeaseCap = time.Second
	// defaultMaxEntriesInFlight: the leader has one group-commit entry
	// under way at a time, from its append until it is applied, and what
	// arrives meanwhile goes into the next entry together. Every entry
	// costs an fsync on the leader and on each follower (a follower fsyncs
	// each AppendEntries it receives) and CPU on every node; on two cores,
	// letting the next entry be appended while the previous one replicated
	// made more, smaller entries and cost 12% of closed-loop throughput
	// and a fifth more CPU per decision, for no gain in open-loop latency
	// (docs/BENCHMARKS.md has the figures). A forward costs no fsync: a
	// follower keeps four under way.
	defaultMaxEntriesInFlight  = 1
	defaultMaxForwardsInFlight = 4
	// DefaultMaxKeys caps the live (key, limit) pairs: about half a
	// gigabyte of state at the ~105 bytes of heap a live key costs
	// (fsm.BenchmarkStateBytesPerKey), and 1-1.7 GB of a node's memory at
	// the 200-340 bytes a key costs the process (docs/algorithms.md).
	DefaultMaxKeys = 5_000_000
	// DefaultMaxWaitPerCaller is Config.MaxWaitPerCaller's default: long
	// enough to smooth bursts, short next to the hour a request may
	// otherwise ask for.
	DefaultMaxWaitPerCaller = time.Minute
	// DefaultMaxLeasesPerCaller is Config.MaxLeasesPerCaller's default: a
	// tenth of the cluster's contract.MaxLeases, so that it takes ten
	// callers at their bound to fill it.
	DefaultMaxLeasesPerCaller = 100_000
	// DefaultMaxRequestIDsPerCaller is Config.MaxRequestIDsPerCaller's
	// default: a quarter of the IDs the state remembers
	// (fsm.MaxDedupEntries), about 870 requests a second with IDs from one
	// caller, sustained over their five minutes.
	DefaultMaxRequestIDsPerCaller = 262_144
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
	// RaftAddr is the address Raft listens on and, unless RaftAdvertise is
	// set, advertises to the other members, for example "127.0.0.1:7071".
	// Without RaftAdvertise it must name a host, not 0.0.0.0. Port 0 picks
	// a free port (see Node.RaftAddr); a node that restarts must then be
	// given the port it had.
	RaftAddr string
	// RaftListener, if set, is where Raft listens, in place of RaftAddr: a
	// program that binds its ports itself (to report every one before the
	// node opens, or to hand over a port it holds) gives it here. The node
	// closes it when it closes, or when Open fails.
	RaftListener net.Listener
	// RaftAdvertise, if set, is the host:port the other members dial to
	// reach this node's Raft port, for example a stable DNS name such as
	// "limitnode-0.limitnode-peers:7071" while RaftAddr is "0.0.0.0:7071".
	// It is the node's address in the cluster's configuration. Port 0
	// stands for the port listened on ("my-host:0" with RaftAddr
	// "0.0.0.0:0").
	RaftAdvertise string
	// HTTPAddr is the node's HTTP API address as the other members should
	// see it. It is recorded in the replicated state for GET /v1/cluster.
	HTTPAddr string
	// DataDir holds the Raft log, the stable store and snapshots.
	DataDir string
	// SnapshotDir, if set, holds the snapshots (in its snapshots/) instead
	// of DataDir. Snapshots are synced every few megabytes as they are
	// written (snapshots.go); on another disk they do not share the log's
	// fsyncs at all.
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
	// MaxClockStep of the time elapsed since it took over; see cluster/internal/clusterclock).
	// Nil means time.Now. Tests inject a skewed one.
	Clock func() time.Time
	// MaxClockStep bounds how far the leader's stamp may differ from the
	// cluster time predicted by the real time elapsed since it took over
	// (see cluster/internal/clusterclock). Default 1s. A test whose Clock is the truth and
	// jumps may set it large.
	MaxClockStep time.Duration
	// NodeTLS, when set, makes the Raft port speak mutual TLS (see
	// NodeTLS); nil means plain TCP. Every member of a cluster must have it,
	// or none.
	NodeTLS *NodeTLS
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
	// MaxBatchChecks bounds the checks in one Raft entry, which is what
	// applying it costs: an entry is never held up by more than this much
	// work. Default 1024.
	MaxBatchChecks int
	// ConsistencyCheckEvery is how often the leader appends a checkpoint at
	// which every replica takes the digest of its state, for the leader to
	// compare (see Node.CheckConsistency). Default 5m; negative: never.
	ConsistencyCheckEvery time.Duration
	// MaxRaftConns caps the connections open at once on the Raft port (Raft
	// and forwarding); one more is closed at once. Default 1024.
	MaxRaftConns int
	// RaftIdleTimeout closes a connection on the Raft port that has sent
	// nothing for this long. Default 2m.
	RaftIdleTimeout time.Duration
	// MaxEntriesInFlight is how many group-commit entries the leader may
	// have under way at once, each from its append until it is applied.
	// With the default, 1, requests gather into one entry while the
	// previous one commits. With MaxBatchRequests 1 and a large value
	// here, every request is its own Raft Apply, which is the "bare Raft"
	// baseline of cmd/limitbench.
	MaxEntriesInFlight int
	// MaxForwardsInFlight is how many forwarded batches a follower has
	// under way to the leader at once, each on a connection of its own, in
	// each of its two forwarding batchers (requests to decide, and those
	// its replica denies). Default 4; as for MaxEntriesInFlight, requests
	// gather only while all are under way.
	MaxForwardsInFlight int
	// NoSync skips the fsync of the Raft log on every append (bbolt's
	// NoSync). Decisions are then acknowledged once a quorum holds them in
	// memory and in the OS page cache: a crash of the limitnode processes
	// loses nothing, and neither does the loss of a minority of machines,
	// but a power failure or kernel crash of a majority at once can lose
	// the last acknowledged decisions (tokens spent then come back). The
	// default, false, fsyncs every append on every node.
	NoSync bool
	// NoStats turns off the decision statistics (Stats, the per-policy
	// counters), for measuring what they cost.
	NoStats bool
	// NoFastDenials makes the leader append every request to the log, the
	// denied ones too, instead of answering a denial from its applied
	// state after confirming its leadership (groupCommit.denyFast); for comparison.
	NoFastDenials bool
	// MaxClockRate is how much faster than real time cluster time may run
	// (cluster/internal/clusterclock): a leader whose clock is ahead catches up at this rate.
	// Default DefaultMaxClockRate, a hundredth; a test that moves its
	// clock by hand and wants the leader to follow may raise it (deny
	// leases, which time cluster time on monotonic clocks, then get
	// shorter by as much).
	MaxClockRate float64
	// DenyLeaseCap bounds a deny lease (package cluster/internal/denylease): how long a node
	// answers a request the leader denied with the same denial, without
	// asking, and so how long a command that gives capacity back (a policy
	// change, a key reset, a restore) waits before it is acknowledged.
	// Default 1s (DefaultDenyLeaseCap); negative: no deny leases, and no
	// wait.
	DenyLeaseCap time.Duration
	// MaxKeys caps the live (key, limit) pairs the cluster keeps, so that a
	// flood of distinct keys cannot exhaust memory. Default DefaultMaxKeys;
	// negative means no cap. The leader's setting applies (it travels in
	// each Raft entry), so give every node the same.
	MaxKeys int64
	// MaxWaitPerCaller bounds the max_wait a request may ask for
	// (contract.Request.MaxWait). A reservation puts its key in debt
	// by up to its wait, during which every other caller of the key is
	// denied, so this is how long one caller's reservations can shut the
	// others out of a shared key. Default DefaultMaxWaitPerCaller; negative
	// means algorithms.MaxWait, the contract's own bound. Give every node
	// the same: the node a request arrives at checks it.
	MaxWaitPerCaller time.Duration
	// MaxLeasesPerCaller bounds the leases and waiting lease requests one
	// caller (an API token, contract.Caller) holds at once, so that one
	// caller cannot fill the cluster's contract.MaxLeases and lock every
	// other out. Default DefaultMaxLeasesPerCaller; negative means no bound
	// but the cluster's. The node a request arrives at applies its own.
	MaxLeasesPerCaller int64
	// MaxRequestIDsPerCaller bounds the request IDs one caller (an API
	// token; without tokens there is one caller, bound by the cluster's
	// fsm.MaxDedupEntries alone) has remembered at once:
	// past it, its requests with new IDs are refused
	// (contract.CodeResourceExhausted) until its older IDs reach the end of
	// their five minutes, and no caller's IDs are ever forgotten early to
	// make room for another's. Default DefaultMaxRequestIDsPerCaller;
	// negative means no bound but the cluster's fsm.MaxDedupEntries. The
	// leader's applies.
	MaxRequestIDsPerCaller int64
	// KeyLimitFailOpen chooses what happens to a request that needs a new
	// key once MaxKeys are live: false (the default) refuses it with
	// ErrKeyLimit; true admits it without recording it, so new keys go
	// unlimited until room frees up.
	KeyLimitFailOpen bool
	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout are Raft's;
	// defaults 500ms, 500ms and 250ms. A node that is its cluster's only
	// voter also holds its calls after it starts for four times the longer
	// of HeartbeatTimeout and ElectionTimeout (holdAloneFor).
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

func withDefaults(cfg Config) Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Dial == nil {
		cfg.Dial = transport.DialTCP
	}
	// Zero is the default where a negative value means none.
	cfg.MaxKeys = cmp.Or(cfg.MaxKeys, DefaultMaxKeys)
	cfg.MaxWaitPerCaller = cmp.Or(cfg.MaxWaitPerCaller, DefaultMaxWaitPerCaller)
	if cfg.MaxWaitPerCaller < 0 || cfg.MaxWaitPerCaller > algorithms.MaxWait {
		cfg.MaxWaitPerCaller = algorithms.MaxWait
	}
	cfg.MaxLeasesPerCaller = cmp.Or(cfg.MaxLeasesPerCaller, DefaultMaxLeasesPerCaller)
	cfg.MaxRequestIDsPerCaller = cmp.Or(cfg.MaxRequestIDsPerCaller, DefaultMaxRequestIDsPerCaller)
	cfg.DenyLeaseCap = cmp.Or(cfg.DenyLeaseCap, DefaultDenyLeaseCap)
	cfg.ConsistencyCheckEvery = cmp.Or(cfg.ConsistencyCheckEvery, 5*time.Minute)
	cfg.SnapshotThreshold = cmp.Or(cfg.SnapshotThreshold, 8192)
	// The FSM's snapshot is small next to the log; keeping fewer trailing
	// entries than Raft's 10240 keeps raft.db smaller.
	cfg.TrailingLogs = cmp.Or(cfg.TrailingLogs, 4096)
	cfg.SnapshotDir = cmp.Or(cfg.SnapshotDir, cfg.DataDir)
	// Anything not positive is the default.
	cfg.MaxClockStep = positiveOr(cfg.MaxClockStep, DefaultMaxClockStep)
	cfg.RequestTimeout = positiveOr(cfg.RequestTimeout, defaultRequestTimeout)
	cfg.TransferTimeout = positiveOr(cfg.TransferTimeout, defaultTransferTimeout)
	cfg.MaxBatchRequests = positiveOr(cfg.MaxBatchRequests, defaultMaxBatchRequests)
	cfg.MaxBatchChecks = positiveOr(cfg.MaxBatchChecks, defaultMaxBatchChecks)
	cfg.MaxClockRate = positiveOr(cfg.MaxClockRate, DefaultMaxClockRate)
	cfg.MaxRaftConns = positiveOr(cfg.MaxRaftConns, 1024)
	cfg.RaftIdleTimeout = positiveOr(cfg.RaftIdleTimeout, 2*time.Minute)
	cfg.MaxEntriesInFlight = positiveOr(cfg.MaxEntriesInFlight, defaultMaxEntriesInFlight)
	cfg.MaxForwardsInFlight = positiveOr(cfg.MaxForwardsInFlight, defaultMaxForwardsInFlight)
	cfg.HeartbeatTimeout = positiveOr(cfg.HeartbeatTimeout, defaultHeartbeatTimeout)
	cfg.ElectionTimeout = positiveOr(cfg.ElectionTimeout, defaultElectionTimeout)
	cfg.LeaderLeaseTimeout = positiveOr(cfg.LeaderLeaseTimeout, min(defaultLeaderLease, cfg.HeartbeatTimeout))
	cfg.SnapshotInterval = positiveOr(cfg.SnapshotInterval, 30*time.Second)
	return cfg
}

// positiveOr is v when it is positive, else def.
func positiveOr[T ~int | ~int64 | ~float64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
