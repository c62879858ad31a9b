package cluster

import (
	"io"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/cluster/internal/groupcommit"
	"github.com/limitnode/limitnode/fsm"
	"github.com/prometheus/client_golang/prometheus"
)

// nodeMetrics are the node's own Prometheus metrics: where a decision's
// time goes (commit, fsync, forwarding), snapshots and restores, and leader
// changes. The decision statistics are the recorder's (stats.go).
type nodeMetrics struct {
	commit        prometheus.Histogram
	store         prometheus.Histogram
	forward       prometheus.Histogram
	forwardServe  prometheus.Histogram
	readIndex     prometheus.Histogram
	snapshot      prometheus.Histogram
	snapshotBytes prometheus.Gauge
	restore       prometheus.Gauge
	leaderChanges prometheus.Counter
	fastDenials   prometheus.Counter
	leaseDenials  prometheus.Counter
	leasesTaken   prometheus.Counter
	raiseWaits    prometheus.Histogram
	shareAnswers  prometheus.Counter
	shareUnits    *prometheus.CounterVec
	// Where a decision's time goes, stage by stage (see batchWait, apply).
	batchWait *prometheus.HistogramVec
	flushing  *prometheus.GaugeVec
	apply     prometheus.Histogram
}

// latencyBuckets are the buckets of every latency histogram: 100 µs to 10 s.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}

func newNodeMetrics() *nodeMetrics {
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	return &nodeMetrics{
		commit: hist("limitnode_raft_commit_seconds",
			"On the leader: from appending an allow entry to having it committed and applied.", latencyBuckets),
		store: hist("limitnode_raft_store_seconds",
			"Writing log entries to the log store, fsync included (every append on every node).", latencyBuckets),
		forward: hist("limitnode_forward_seconds",
			"On a follower: one forwarded batch's round trip to the leader.", latencyBuckets),
		forwardServe: hist("limitnode_forward_serve_seconds",
			"On the leader: answering one forwarded batch, from its decoded message to its answer (the leader's batch wait and commit included).", latencyBuckets),
		readIndex: hist("limitnode_read_index_seconds",
			"A read of the replicated state catching up: learning the leader's read index and applying through it.", latencyBuckets),
		snapshot: hist("limitnode_snapshot_seconds",
			"Writing one snapshot, from its creation to its close.", []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300}),
		snapshotBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "limitnode_snapshot_bytes",
			Help: "The size of the latest snapshot this node wrote."}),
		restore: prometheus.NewGauge(prometheus.GaugeOpts{Name: "limitnode_restore_seconds",
			Help: "How long this node's latest restore from a snapshot took."}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "limitnode_leader_changes_total",
			Help: "Times this node saw the leader change (including to no leader)."}),
		fastDenials: prometheus.NewCounter(prometheus.CounterOpts{Name: "limitnode_fast_denials_total",
			Help: "On the leader: requests denied from the applied state, without a log entry."}),
		leaseDenials: prometheus.NewCounter(prometheus.CounterOpts{Name: "limitnode_deny_lease_denials_total",
			Help: "On this node: requests answered from a deny lease, without asking the leader (counted only where answered: sum over nodes)."}),
		leasesTaken: prometheus.NewCounter(prometheus.CounterOpts{Name: "limitnode_deny_leases_total",
			Help: "On this node: deny leases taken from the leader's denials."}),
		raiseWaits: hist("limitnode_raise_wait_seconds", "On the leader: how long a command that gives capacity back waited for deny leases and shares to end before it was acknowledged.", latencyBuckets),
		shareAnswers: prometheus.NewCounter(prometheus.CounterOpts{Name: "limitnode_share_admissions_total",
			Help: "On this node: requests admitted from a share of a key's budget this node holds, without asking the leader."}),
		shareUnits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "limitnode_share_units_total",
			Help: "On this node: units of shares, by what became of them: granted to this node, spent here, returned unspent, or expired unspent."}, []string{"outcome"}),
		batchWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "limitnode_batch_wait_seconds",
			Help:    "How long a call waited in a group-commit batcher before its flush began: leader (for a Raft entry), follower (for a forward), follower-denials (a forward of what this replica denies).",
			Buckets: latencyBuckets}, []string{"batcher"}),
		flushing: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "limitnode_batch_flushes_in_flight",
			Help: "Flushes a group-commit batcher has under way: Raft entries not yet applied (leader), forwards awaiting the leader's answer (follower, follower-denials). An entry holds the leader's pipeline until it is applied, a forward until its answer: requests gather into one flush while the pipeline is full (cluster.Config.MaxEntriesInFlight, MaxForwardsInFlight)."}, []string{"batcher"}),
		apply: hist("limitnode_fsm_apply_seconds", "Applying one batch of committed log entries to the state machine (every node).", latencyBuckets),
	}
}

func (m *nodeMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.commit, m.store, m.forward, m.forwardServe, m.readIndex, m.snapshot, m.snapshotBytes, m.restore, m.leaderChanges, m.fastDenials, m.leaseDenials, m.leasesTaken, m.raiseWaits, m.shareAnswers, m.shareUnits, m.batchWait, m.flushing, m.apply}
}

// batcher returns the metrics of the named batcher.
func (m *nodeMetrics) batcher(name string) groupcommit.Metrics {
	return groupcommit.Metrics{Waited: m.batchWait.WithLabelValues(name), Flushing: m.flushing.WithLabelValues(name)}
}

// since observes the time since start, in seconds.
func since(h prometheus.Observer, start time.Time) { h.Observe(time.Since(start).Seconds()) }

// Collectors are the node's Prometheus metrics, for the HTTP API's
// /metrics: Raft latencies, snapshots, leader changes, and the decisions
// applied by policy and outcome.
func (n *Node) Collectors() []prometheus.Collector {
	return append(append(n.metrics.collectors(), n.stats.collectors()...), sharesCollector{n.fsm})
}

// timedLogStore times the log store's writes (an fsync each).
type timedLogStore struct {
	raft.LogStore
	hist prometheus.Histogram
}

func (s *timedLogStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

func (s *timedLogStore) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := s.LogStore.StoreLogs(logs)
	since(s.hist, start)
	return err
}

// timedFSM times applies and restores from a snapshot.
type timedFSM struct {
	*fsm.FSM
	restore prometheus.Gauge
	apply   prometheus.Histogram
}

func (f *timedFSM) ApplyBatch(logs []*raft.Log) []any {
	defer since(f.apply, time.Now())
	return f.FSM.ApplyBatch(logs)
}

func (f *timedFSM) Restore(rc io.ReadCloser) error {
	start := time.Now()
	err := f.FSM.Restore(rc)
	f.restore.Set(time.Since(start).Seconds())
	return err
}

// sharesCollector reports the shares outstanding in the state this node
// applied, per policy, as it is when scraped.
type sharesCollector struct{ fsm *fsm.FSM }

var (
	sharesOutstandingDesc = prometheus.NewDesc("limitnode_shares_outstanding",
		"Shares of keys' budgets outstanding in the state this node applied, by policy (\"\" for inline limits).", []string{"policy"}, nil)
	shareUnitsOutstandingDesc = prometheus.NewDesc("limitnode_share_units_outstanding",
		"Units held in outstanding shares in the state this node applied, by policy (\"\" for inline limits).", []string{"policy"}, nil)
)

func (sharesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sharesOutstandingDesc
	ch <- shareUnitsOutstandingDesc
}

func (c sharesCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.fsm.OutstandingShares() {
		ch <- prometheus.MustNewConstMetric(sharesOutstandingDesc, prometheus.GaugeValue, float64(s.Shares), s.Policy)
		ch <- prometheus.MustNewConstMetric(shareUnitsOutstandingDesc, prometheus.GaugeValue, float64(s.Units), s.Policy)
	}
}
