package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
	"github.com/prometheus/client_golang/prometheus"
)

// rlsConfigActor is who the audit trail says put a domain of -rls-config
// after the node started (the bootstrap's own put is seedActor's).
const rlsConfigActor = "rls-config"

// rlsPollInterval is how often -rls-config is read. A change is taken once
// two reads in a row find the same content, so that a file caught half
// written is never taken: it is in force within two to three intervals.
const rlsPollInterval = 500 * time.Millisecond

// rlsApplyTimeout bounds one round of putting the file's domains through
// the log; what is not put is tried again at the next read.
const rlsApplyTimeout = 10 * time.Second

// rlsCluster is what the watch needs of the node.
type rlsCluster interface {
	IsLeader() bool
	AppliedRLSConfig(domain string) (rls.Config, bool)
	RLSConfig(ctx context.Context, domain string) (rls.Config, bool, error)
	PutRLSConfig(ctx context.Context, c rls.Config) error
}

// rlsWatch applies -rls-config as it changes. Every node reads the file
// (or directory) every rlsPollInterval and reports a changed one that is
// invalid (its log, its metrics) without changing anything. The node that
// leads puts through the log each domain of the file whose configuration
// in the cluster differs from the file's, when the file has changed (a
// valid change it took) and when it comes to lead (a new leader reads its
// own file): the log makes every replica switch at one
// index. A change made through the API (limitnode rls put, rls delete)
// holds until one of those: the file is the source, as
// envoyproxy/ratelimit's runtime directory is, and the API the way to
// change a domain for the moment. Domains the file does not name are left
// to the API.
type rlsWatch struct {
	path    string
	cluster rlsCluster
	logger  *slog.Logger
	metrics rlsWatchMetrics

	// The rest belongs to the goroutine of run.
	read      bool         // a read was taken
	current   [32]byte     // the digest of what was read last taken
	pending   [32]byte     // a new digest, taken if the next read finds it again
	configs   []rls.Config // the last valid configuration read, in file order
	encoded   [][]byte     // configs, each as sameRLSConfig compares it
	leading   bool         // this node led at the last read
	due       bool         // configs are to be applied, once this node leads
	putErrors map[string]string
}

type rlsWatchMetrics struct {
	reloads    *prometheus.CounterVec
	successful prometheus.Gauge
	applied    *prometheus.CounterVec
}

func newRLSWatch(path string, cluster rlsCluster, logger *slog.Logger) *rlsWatch {
	return &rlsWatch{path: path, cluster: cluster, logger: logger.With("rls_config", path), putErrors: map[string]string{},
		metrics: rlsWatchMetrics{
			reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "limitnode_rls_config_reloads_total",
				Help: "Contents of -rls-config this node took (the first, then each change), by result: valid, or invalid (nothing changed)."}, []string{"result"}),
			successful: prometheus.NewGauge(prometheus.GaugeOpts{Name: "limitnode_rls_config_last_reload_successful",
				Help: "1 when -rls-config as this node last read it is valid, 0 when it is not (the cluster keeps the configuration it has)."}),
			applied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "limitnode_rls_config_applied_total",
				Help: "Domains of -rls-config this node put through the log as the leader, because the cluster's differed, by result: ok, error (tried again)."}, []string{"result"}),
		}}
}

// collectors are the watch's metrics, for /metrics.
func (w *rlsWatch) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.metrics.reloads, w.metrics.successful, w.metrics.applied}
}

// run reads and applies the file every rlsPollInterval until ctx ends.
func (w *rlsWatch) run(ctx context.Context) {
	w.logger.Info("watching -rls-config: the leader applies a changed file through the log", "every", rlsPollInterval)
	tick := time.NewTicker(rlsPollInterval)
	defer tick.Stop()
	for {
		w.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// poll reads the file once, takes it if it changed and held still, and,
// on the leader, applies what differs.
func (w *rlsWatch) poll(ctx context.Context) {
	files, readErr := readRLSFiles(w.path)
	digest := rlsDigest(files, readErr)
	switch {
	case w.read && digest == w.current:
		w.pending = digest
	case w.read && digest != w.pending:
		w.pending = digest // changed: taken if the next read finds the same
	default:
		w.read, w.current = true, digest
		if w.take(files, readErr) {
			w.due = true
		}
	}
	leading := w.cluster.IsLeader()
	if leading && !w.leading {
		w.due = true // a new leader applies its own file
	}
	w.leading = leading
	if leading && w.due {
		ctx, cancel := context.WithTimeout(ctx, rlsApplyTimeout)
		defer cancel()
		w.due = !w.apply(ctx)
	}
}

// take makes what was read the configuration to apply if it is valid,
// reports it either way, and says whether it was.
func (w *rlsWatch) take(files []rlsFile, readErr error) bool {
	var parsed []rls.Config
	err := readErr
	if err == nil {
		parsed, err = parseRLSFiles(files)
	}
	if err != nil {
		w.metrics.reloads.WithLabelValues("invalid").Inc()
		w.metrics.successful.Set(0)
		w.logger.Error("-rls-config is invalid: nothing changes, the cluster keeps deciding with the configuration it has", "err", err)
		return false
	}
	encoded := make([][]byte, len(parsed))
	for i := range parsed {
		encoded[i] = encodeRLSConfig(parsed[i])
	}
	for _, old := range w.configs {
		if !slices.ContainsFunc(parsed, func(c rls.Config) bool { return c.Domain == old.Domain }) {
			w.logger.Warn("a domain is no longer in -rls-config; the cluster keeps it until limitnode rls delete removes it", "domain", old.Domain)
		}
	}
	w.configs, w.encoded = parsed, encoded
	clear(w.putErrors)
	w.metrics.reloads.WithLabelValues("valid").Inc()
	w.metrics.successful.Set(1)
	w.logger.Info("read -rls-config", "domains", domainsOf(parsed))
	return true
}

// apply puts each domain of the file whose configuration in the cluster
// differs, once the leader's caught-up state confirms the difference, and
// reports whether it is done: false when a put failed in a way that may
// pass (no quorum, an outcome unknown), to be tried again at the next read.
// A put the cluster refuses (too many domains) is not tried again until
// the file changes or another node comes to lead: each try would be a log
// entry.
func (w *rlsWatch) apply(ctx context.Context) bool {
	done := true
	for i, c := range w.configs {
		if have, ok := w.cluster.AppliedRLSConfig(c.Domain); ok && sameRLSConfig(have, w.encoded[i]) {
			continue
		}
		have, had, err := w.cluster.RLSConfig(ctx, c.Domain)
		if err != nil {
			done = false // no read index to be had now (no leader): the next read tries again
			continue
		}
		if had && sameRLSConfig(have, w.encoded[i]) {
			continue
		}
		err = w.cluster.PutRLSConfig(contract.WithActor(ctx, rlsConfigActor), c)
		if err != nil && ctx.Err() != nil {
			return false // the node stops, or the round took too long: the next read tries again
		}
		var refused *contract.Error
		switch {
		case errors.As(err, &refused) && refused.Code == contract.CodeInvalidArgument:
			w.metrics.applied.WithLabelValues("error").Inc()
			w.logger.Error("the cluster refused a domain of -rls-config; it is tried again when the file changes or another node comes to lead", "domain", c.Domain, "err", err)
			continue
		case err != nil:
			done = false
			w.metrics.applied.WithLabelValues("error").Inc()
			if w.putErrors[c.Domain] != err.Error() {
				w.putErrors[c.Domain] = err.Error()
				w.logger.Warn("putting a domain of -rls-config through the log failed; trying again", "domain", c.Domain, "err", err)
			}
			continue
		}
		delete(w.putErrors, c.Domain)
		w.metrics.applied.WithLabelValues("ok").Inc()
		w.logger.Info("put a domain of -rls-config through the log: the cluster's configuration of it differed from the file's", "domain", c.Domain, "had_one", had)
	}
	return done
}

// rlsDigest identifies what a read found: each file's path and content, or
// the error.
func rlsDigest(files []rlsFile, readErr error) [32]byte {
	h := sha256.New()
	if readErr != nil {
		fmt.Fprintf(h, "error %d:%s", len(readErr.Error()), readErr)
	}
	for _, f := range files {
		fmt.Fprintf(h, "file %d:%s %d:", len(f.path), f.path, len(f.data))
		h.Write(f.data)
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// encodeRLSConfig is c as sameRLSConfig compares it: JSON, whose
// omitempty makes an empty list and none alike, as the log's encoding
// does.
func encodeRLSConfig(c rls.Config) []byte {
	data, _ := json.Marshal(c) // a Config holds only strings, numbers, booleans and lists: it cannot fail
	return data
}

// sameRLSConfig reports whether have is the configuration encoded.
func sameRLSConfig(have rls.Config, encoded []byte) bool {
	return string(encodeRLSConfig(have)) == string(encoded)
}

func domainsOf(configs []rls.Config) []string {
	names := make([]string, len(configs))
	for i, c := range configs {
		names[i] = c.Domain
	}
	return names
}
