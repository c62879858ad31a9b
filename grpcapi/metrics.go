package grpcapi

import (
	"cmp"

	"github.com/limitnode/limitnode/rls"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the rate limit service's Prometheus metrics. Calls are
// counted by answer only; descriptors only when their configuration asks
// (a rate_limit with a name, or detailed_metric), labelled with the domain
// and the name or the configuration's path, never a request's values: the
// labels are bounded by the configuration, whatever Envoy sends.
type metrics struct {
	calls       *prometheus.CounterVec
	hits        *prometheus.CounterVec
	overLimit   *prometheus.CounterVec
	nearLimit   *prometheus.CounterVec
	withinLimit *prometheus.CounterVec
	shadowMode  *prometheus.CounterVec
	// duration times ShouldRateLimit from its decoded request to its
	// response, the cluster's decision included.
	duration prometheus.Histogram
}

// descriptorLabels label the per-descriptor counters.
var descriptorLabels = []string{"domain", "descriptor"}

func newMetrics() *metrics {
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	return &metrics{
		calls: counter("limitnode_rls_requests_total",
			"ShouldRateLimit calls answered by this node, by answer (OK, OVER_LIMIT, or a gRPC error code).", []string{"code"}),
		hits: counter("limitnode_rls_hits_total",
			"Hits asked of a metered descriptor's limit.", descriptorLabels),
		overLimit: counter("limitnode_rls_over_limit_total",
			"Hits a metered descriptor's limit denied (in shadow mode too).", descriptorLabels),
		nearLimit: counter("limitnode_rls_near_limit_total",
			"Hits admitted that left a metered descriptor's limit at 80% used or more.", descriptorLabels),
		withinLimit: counter("limitnode_rls_within_limit_total",
			"Hits admitted and consumed by a metered descriptor's limit.", descriptorLabels),
		shadowMode: counter("limitnode_rls_shadow_mode_total",
			"Hits a metered descriptor's limit in shadow mode would have denied.", descriptorLabels),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "limitnode_rls_request_duration_seconds",
			Help:    "Time to answer a ShouldRateLimit call, from its decoded request to its response (the decision included).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.calls, m.hits, m.overLimit, m.nearLimit, m.withinLimit, m.shadowMode, m.duration}
}

// answered counts one call by its answer.
func (m *metrics) answered(code string) { m.calls.WithLabelValues(code).Inc() }

// descriptors counts the hits of every metered descriptor of a decided
// query.
func (m *metrics) descriptors(q rls.Query, d rls.Decision) {
	for i := range d.Descriptors {
		dd := &d.Descriptors[i]
		if !dd.Limited || !dd.Metered {
			continue
		}
		hits := float64(q.Descriptors[i].Hits)
		labels := []string{q.Domain, cmp.Or(dd.Name, dd.Path)}
		m.hits.WithLabelValues(labels...).Add(hits)
		switch dec := &dd.Decision; {
		case !dec.Allowed:
			m.overLimit.WithLabelValues(labels...).Add(hits)
			if dd.Shadow {
				m.shadowMode.WithLabelValues(labels...).Add(hits)
			}
		case d.Allowed:
			m.withinLimit.WithLabelValues(labels...).Add(hits)
			if dec.NearLimit() {
				m.nearLimit.WithLabelValues(labels...).Add(hits)
			}
		}
	}
}
