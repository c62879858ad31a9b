package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the API's Prometheus metrics, on a registry of their own so
// that several nodes can run in one process (tests, embedding).
type metrics struct {
	registry  *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	decisions *prometheus.CounterVec
}

func newMetrics(observer Observer, more []prometheus.Collector) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limitnode_http_requests_total",
			Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "limitnode_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limitnode_decisions_total",
			Help: "Allow requests decided through this node, by outcome (allowed, denied).",
		}, []string{"outcome"}),
	}
	m.registry.MustRegister(m.requests, m.latency, m.decisions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if observer != nil { // the cluster's gauges, from a backend that reports them
		m.registry.MustRegister(&clusterCollector{observer: observer})
	}
	m.registry.MustRegister(more...)
	return m
}

func (m *metrics) decided(allowed bool) {
	outcome := "denied"
	if allowed {
		outcome = "allowed"
	}
	m.decisions.WithLabelValues(outcome).Inc()
}

// instrument wraps a route's handler to count and time its answers. The
// route label is the registered pattern, so its cardinality is fixed.
func (m *metrics) instrument(route string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r)
		m.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
		m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// clusterCollector reports the node's view of the cluster at scrape time.
type clusterCollector struct{ observer Observer }

var (
	descTerm      = prometheus.NewDesc("limitnode_raft_term", "The Raft term this node knows.", nil, nil)
	descCommit    = prometheus.NewDesc("limitnode_raft_commit_index", "The highest log index this node knows to be committed.", nil, nil)
	descApplied   = prometheus.NewDesc("limitnode_raft_applied_index", "The highest log index this node has applied.", nil, nil)
	descLeader    = prometheus.NewDesc("limitnode_is_leader", "1 if this node is the leader.", nil, nil)
	descHasLeader = prometheus.NewDesc("limitnode_has_leader", "1 if this node knows a leader.", nil, nil)
	descMembers   = prometheus.NewDesc("limitnode_cluster_members", "Members in this node's view of the cluster.", nil, nil)
	descKeys      = prometheus.NewDesc("limitnode_live_keys", "(key, limit) pairs with live state in this node's copy.", nil, nil)
	descLeases    = prometheus.NewDesc("limitnode_live_leases", "Concurrency leases held, in this node's copy.", nil, nil)
	descWaiters   = prometheus.NewDesc("limitnode_lease_waiters", "Requests waiting in lease queues, in this node's copy.", nil, nil)
	descBlocked   = prometheus.NewDesc("limitnode_blocked_keys", "Keys blocked now in this node's copy, by who blocked them: operator or penalty.", []string{"by"}, nil)
	// Per member, as the leader last learnt (members are few: the label's
	// cardinality is the cluster's size).
	descReachable   = prometheus.NewDesc("limitnode_member_reachable", "1 if the member answered the leader's latest ask, as this node knows.", []string{"member"}, nil)
	descLastContact = prometheus.NewDesc("limitnode_member_last_contact_seconds", "Time since the member last answered the leader, as this node knows.", []string{"member"}, nil)
	descDiverged    = prometheus.NewDesc("limitnode_member_diverged", "1 if the member's state differed from the leader's at the last checkpoint compared.", []string{"member"}, nil)
	descLag         = prometheus.NewDesc("limitnode_member_lag_entries", "How many log entries the member's applied index trailed the leader's at its last answer.", []string{"member"}, nil)
)

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTerm, descCommit, descApplied, descLeader, descHasLeader, descMembers, descKeys, descLeases, descWaiters, descBlocked, descReachable, descLastContact, descLag, descDiverged} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.observer.Status()
	leader, hasLeader := 0.0, 0.0
	if st.LeaderID != "" {
		hasLeader = 1
		if st.SelfID == st.LeaderID {
			leader = 1
		}
	}
	ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, float64(st.Term))
	ch <- prometheus.MustNewConstMetric(descCommit, prometheus.GaugeValue, float64(st.CommitIndex))
	ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(st.AppliedIndex))
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(descHasLeader, prometheus.GaugeValue, hasLeader)
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(len(st.Members)))
	ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(st.Keys))
	ch <- prometheus.MustNewConstMetric(descLeases, prometheus.GaugeValue, float64(st.Leases))
	ch <- prometheus.MustNewConstMetric(descWaiters, prometheus.GaugeValue, float64(st.LeaseWaiters))
	ch <- prometheus.MustNewConstMetric(descBlocked, prometheus.GaugeValue, float64(st.Blocked-st.BlockedByPenalty), "operator")
	ch <- prometheus.MustNewConstMetric(descBlocked, prometheus.GaugeValue, float64(st.BlockedByPenalty), "penalty")
	for _, m := range st.Members {
		h := m.Health
		if h == nil {
			continue
		}
		reachable := 0.0
		if h.Reachable {
			reachable = 1
		}
		ch <- prometheus.MustNewConstMetric(descReachable, prometheus.GaugeValue, reachable, m.ID)
		if h.SinceContact >= 0 {
			ch <- prometheus.MustNewConstMetric(descLastContact, prometheus.GaugeValue, h.SinceContact.Seconds(), m.ID)
		}
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(h.Lag), m.ID)
		diverged := 0.0
		if h.DivergedAt != 0 {
			diverged = 1
		}
		ch <- prometheus.MustNewConstMetric(descDiverged, prometheus.GaugeValue, diverged, m.ID)
	}
}
