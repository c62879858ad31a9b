package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/grpcapi"
	"github.com/limitnode/limitnode/httpapi"
	"github.com/limitnode/limitnode/internal/buildinfo"
	"github.com/limitnode/limitnode/internal/guard"
	"github.com/limitnode/limitnode/internal/transport"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/peer"
)

// run starts the node and serves until ctx ends, then shuts down cleanly.
// ready, if not nil, receives the HTTP address once the node serves.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready chan<- string) error {
	c, logger, sec, seed, err := prepare(args, getenv, stderr)
	if err != nil {
		return err
	}
	ls, err := c.bind()
	if err != nil {
		return err
	}
	bound := ls.addrs()
	bound.log(logger)
	c.fitDescriptors(descriptorLimit(), logger)
	httpListener := c.guard(ls.http, logger)
	defer httpListener.Close()
	advertised, err := advertiseHTTP(bound.HTTP, cmp.Or(c.advertiseRaft, c.raftAddr), c.advertiseHTTP)
	if err != nil {
		ls.close()
		return err
	}
	joinAddrs := splitAddrs(c.join)
	node, err := cluster.Open(nodeConfig(c, sec, logger, advertised, len(joinAddrs) == 0 && c.expect == 0, ls.raft))
	if err != nil {
		ls.close()
		return err
	}
	var watch *rlsWatch
	var watchMetrics []prometheus.Collector
	if c.rlsConfig != "" {
		watch = newRLSWatch(c.rlsConfig, node, logger)
		watchMetrics = watch.collectors()
	}
	served := &seedingNode{Node: node}
	served.storing.Store(!node.HadState() && c.expect == 0 && len(joinAddrs) == 0 && !seed.empty()) // enterCluster stores it before it returns
	srv, err := serve(c, sec, logger, served, httpListener, ls.grpc, watchMetrics)
	if err != nil {
		_ = node.Close()
		return err
	}
	bound.AdvertisedHTTP, bound.AdvertisedRaft = advertised, node.RaftAddr()
	if c.addrFile != "" {
		if err := writeAddrFile(c.addrFile, bound); err != nil {
			_ = srv.shutdown(logger, node)
			return err
		}
		defer os.Remove(c.addrFile)
	}
	logger.Info("limitnode serving", "version", buildinfo.Version(), "id", c.id, "http", srv.httpAddr, "advertised_http", advertised, "raft", node.RaftAddr(), "data", c.dataDir,
		"https", sec.httpTLS != nil, "raft_tls", sec.nodeTLS != nil, "tokens", sec.authz != nil)
	warnIfExposed(logger, c, sec)

	self := client.Member{ID: c.id, RaftAddr: node.RaftAddr(), HTTPAddr: advertised}
	joinOpts := client.Options{TLS: sec.joinTLS, Token: sec.joinToken}
	formCtx, stopForming := context.WithCancel(ctx)
	var forming sync.WaitGroup
	defer forming.Wait()
	defer stopForming()
	if err := enterCluster(ctx, formCtx, &forming, c, logger, node, seed, joinAddrs, joinOpts, self); err != nil {
		srv.shutdown(logger, node)
		return err
	}
	served.storing.Store(false)
	if watch != nil {
		forming.Go(func() { watch.run(formCtx) }) // ends with the node, as forming does
	}
	if ready != nil {
		ready <- srv.httpAddr
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-srv.errs:
		logger.Error("a server stopped", "err", err)
	}
	stopForming()
	forming.Wait()
	return srv.shutdown(logger, node)
}

// prepare reads what a node starts from, before it opens anything: its
// flags and environment, its logger, its security files and its seed.
func prepare(args []string, getenv func(string) string, stderr io.Writer) (c config, logger *slog.Logger, sec secured, s seed, err error) {
	if c, err = parseConfig(args, getenv, stderr); err != nil {
		return
	}
	if err = c.checkPorts(); err != nil {
		return
	}
	if logger, err = newLogger(c.logLevel, stderr); err != nil {
		return
	}
	warnUnknownVariables(logger)
	if sec, err = loadSecurity(c.security, logger); err != nil {
		return
	}
	s, err = readSeed(c, logger)
	return
}

// newLogger is the node's logger at -log-level.
func newLogger(levelName string, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
}

// splitAddrs is a comma-separated list of addresses, blanks dropped.
func splitAddrs(list string) []string {
	var out []string
	for a := range strings.SplitSeq(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// nodeConfig is the cluster.Config of the command's configuration, Raft
// on raftListener.
func nodeConfig(c config, sec secured, logger *slog.Logger, advertisedHTTP string, bootstrap bool, raftListener net.Listener) cluster.Config {
	return cluster.Config{
		ID:                     c.id,
		RaftAddr:               c.raftAddr,
		RaftListener:           raftListener,
		RaftAdvertise:          c.advertiseRaft,
		HTTPAddr:               advertisedHTTP,
		DataDir:                c.dataDir,
		SnapshotDir:            c.snapshotDir,
		Bootstrap:              bootstrap,
		Logger:                 logger,
		RaftLogLevel:           c.raftLogLevel,
		MaxKeys:                c.maxKeys,
		NoSync:                 c.noSync,
		DenyLeaseCap:           c.denyLeaseCap,
		KeyLimitFailOpen:       c.keyLimitMode == "allow",
		MaxWaitPerCaller:       c.maxWaitPerCaller,
		MaxLeasesPerCaller:     c.maxLeasesPerCaller,
		MaxRequestIDsPerCaller: c.maxRequestIDsPerCaller,
		NodeTLS:                sec.nodeTLS,
		MaxRaftConns:           c.maxRaftConns.n,
		RaftIdleTimeout:        c.raftIdle,
	}
}

// servers are the node's HTTP and (when -grpc is set) gRPC servers, and
// where they report stopping on their own.
type servers struct {
	httpAddr string
	http     *http.Server
	grpc     *grpcapi.Server
	errs     chan error
}

// guard caps the connections of a client-facing port: in all (a new one
// over the cap closes the idlest instead, see guard.Limits.ShedIdle) and
// per client address, and those that have not proven their caller idle for
// -untrusted-idle-timeout at most (the servers' own timeouts close the
// others). The port's server reports its requests to it.
func (c config) guard(ln net.Listener, logger *slog.Logger) *guard.Listener {
	return guard.New(ln, guard.Limits{MaxConns: c.maxHTTPConns.n, MaxConnsPerClient: c.maxConnsPerClient.n, UntrustedIdle: c.untrustedIdle, ShedIdle: true}, logger)
}

// admitter caps the requests under way over HTTP/2 (HTTPS) from one client
// address as the connections from one are capped: an HTTP/1.1 connection
// carries one request at a time, so it needs no count of its own.
func admitter(l *guard.Listener) func(*http.Request) (func(), bool) {
	return func(r *http.Request) (func(), bool) {
		if r.ProtoMajor < 2 {
			return func() {}, true
		}
		return l.Begin(r.RemoteAddr)
	}
}

// serve starts the HTTP API on httpListener and, with -grpc, the gRPC API on
// grpcRaw; /metrics adds extraMetrics to the node's. A call that proves
// its caller marks its connection trusted in the guard.
func serve(c config, sec secured, logger *slog.Logger, node *seedingNode, httpListener *guard.Listener, grpcRaw net.Listener, extraMetrics []prometheus.Collector) (*servers, error) {
	trusted, err := c.trustedProxies()
	if err != nil {
		if grpcRaw != nil {
			grpcRaw.Close()
		}
		return nil, err
	}
	apiOpts := httpapi.Options{Logger: logger, TrustedProxies: trusted, Collectors: append(node.Collectors(), extraMetrics...),
		Proven: func(r *http.Request) { httpListener.Trust(r.RemoteAddr) }, Admit: admitter(httpListener), Profiling: c.pprof}
	grpcOpts := grpcapi.Options{Logger: logger, TLS: sec.httpTLS}
	if sec.authz != nil {
		apiOpts.Authorizer, grpcOpts.Authorizer = sec.authz, sec.authz
	}
	s := &servers{httpAddr: httpListener.Addr().String(), errs: make(chan error, 2)}
	if grpcRaw != nil {
		grpcListener := c.guard(grpcRaw, logger)
		grpcOpts.Proven = func(ctx context.Context) {
			if p, ok := peer.FromContext(ctx); ok {
				grpcListener.Trust(p.Addr.String())
			}
		}
		grpcOpts.Serving = func(ctx context.Context) func() {
			if p, ok := peer.FromContext(ctx); ok {
				return grpcListener.Serving(p.Addr.String())
			}
			return func() {}
		}
		s.grpc = grpcapi.New(node, grpcOpts)
		apiOpts.Collectors = append(apiOpts.Collectors, s.grpc.Collectors()...)
		go func() { s.errs <- fmt.Errorf("gRPC server: %w", s.grpc.Serve(grpcListener)) }()
		logger.Info("serving gRPC", "grpc", grpcListener.Addr().String())
	}
	s.http = httpapi.NewServer(s.httpAddr, httpapi.New(node, apiOpts))
	s.http.ErrorLog = httpapi.ErrorLog(logger)
	s.http.ConnState = httpListener.ConnState
	if sec.httpTLS != nil {
		s.http.TLSConfig = sec.httpTLS
		go func() { s.errs <- s.http.ServeTLS(httpListener, "", "") }()
	} else {
		go func() { s.errs <- s.http.Serve(httpListener) }()
	}
	return s, nil
}

// enterCluster brings a node into its cluster: one that had state restarts
// into it; with -bootstrap-expect it forms one with the others in the
// background (then stores the seed), with -join it joins; a node that
// bootstrapped stores the seed (-policies, -rls-config).
func enterCluster(ctx, formCtx context.Context, forming *sync.WaitGroup, c config, logger *slog.Logger, node *cluster.Node, seed seed, joinAddrs []string, joinOpts client.Options, self client.Member) error {
	switch {
	case node.HadState():
		if len(joinAddrs) > 0 {
			if err := checkSameCluster(ctx, logger, node, c.dataDir, joinAddrs, joinOpts); err != nil {
				return err
			}
			logger.Info("-join and -bootstrap-expect ignored: this node restarts into the cluster it belonged to")
		}
		if len(seed.policies) > 0 {
			logger.Warn(seedIgnored)
		}
	case c.expect > 0:
		if err := refuseRaftPorts(ctx, joinAddrs, joinOpts); err != nil {
			return err
		}
		// The node serves (its view answers the others) while the cluster
		// forms; /readyz says 503 until it has.
		forming.Go(func() {
			formed, err := formCluster(formCtx, logger, node, joinAddrs, c.expect, joinOpts, self)
			if err == nil && formed && !seed.empty() {
				storeSeedUntilItHolds(formCtx, seed, node, logger)
			}
		})
	case len(joinAddrs) > 0:
		if err := joinCluster(ctx, logger, joinAddrs, joinOpts, self, client.MemberChange{Replace: c.replace}, c.joinTimeout); err != nil {
			return err
		}
		if len(seed.policies) > 0 {
			logger.Warn(seedIgnored)
		}
	case !seed.empty():
		return seed.store(ctx, node, logger)
	}
	return nil
}

// checkSameCluster refuses to restart a node with state into the cluster
// at -join when its data directory belongs to another one (started on the
// wrong directory, or on a copy of another cluster's): it asks each -join
// address for its cluster's ID and returns an error naming both IDs if one
// names another. Addresses that do not answer (the others may be starting
// too) are skipped: the Raft port refuses a node of another cluster anyway.
func checkSameCluster(ctx context.Context, logger *slog.Logger, node *cluster.Node, dataDir string, addrs []string, opts client.Options) error {
	mine := node.ClusterID()
	if mine == "" {
		return nil
	}
	for _, addr := range addrs {
		askCtx, cancel := context.WithTimeout(ctx, formAskTimeout)
		st, err := client.NewWithOptions(opts, addr).Cluster(askCtx)
		cancel()
		switch {
		case err != nil:
			logger.Debug("could not ask a -join address which cluster it belongs to", "via", addr, "err", err)
		case st.ClusterID != "" && st.ClusterID != mine:
			return fmt.Errorf("this node's data directory %s belongs to cluster %s, but the cluster at -join %s is %s: start the node on its own data directory, or give it an empty one to join %s as a new member",
				dataDir, mine, addr, st.ClusterID, st.ClusterID)
		}
	}
	return nil
}

// storeSeedUntilItHolds stores the seed in a cluster just formed, trying
// again each second until it holds: storing a policy or a domain again is
// harmless.
func storeSeedUntilItHolds(ctx context.Context, seed seed, node *cluster.Node, logger *slog.Logger) {
	for {
		err := seed.store(ctx, node, logger)
		if err == nil {
			return
		}
		logger.Error("storing -policies and -rls-config failed; trying again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// raftPortGiven is the error for -join naming addr when err, its answer,
// says addr is a node's Raft port (it answers HTTP with 421 wrong_port):
// no retry can change it. It is nil for any other err.
func raftPortGiven(addr string, err error) error {
	if apiErr := (*client.Error)(nil); errors.As(err, &apiErr) && apiErr.Code == transport.WrongPortCode {
		return &usageError{fmt.Sprintf("-join %s: %s", addr, apiErr.Message)}
	}
	return nil
}

// refuseRaftPorts asks each address once for its view of the cluster and
// returns raftPortGiven's error for the first that answers as a Raft port;
// one that does not answer yet (its node may be starting) passes.
func refuseRaftPorts(ctx context.Context, addrs []string, opts client.Options) error {
	for _, addr := range addrs {
		askCtx, cancel := context.WithTimeout(ctx, formAskTimeout)
		_, err := client.NewWithOptions(opts, addr).Cluster(askCtx)
		cancel()
		if err := raftPortGiven(addr, err); err != nil {
			return err
		}
	}
	return nil
}

// joinCluster asks each address in turn to add this node, until one accepts
// or the timeout passes; the members may still be starting. A refusal that
// no retry can change (the cluster answers that this join would evict a
// running member, or that this node answers under another ID) ends it at
// once.
func joinCluster(ctx context.Context, logger *slog.Logger, addrs []string, opts client.Options, self client.Member, change client.MemberChange, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var lastErr error
		for _, addr := range addrs {
			err := client.NewWithOptions(opts, addr).JoinWith(ctx, self, change)
			if err == nil {
				logger.Info("joined the cluster", "via", addr)
				return nil
			}
			if apiErr := (*client.Error)(nil); errors.As(err, &apiErr) && (apiErr.StatusCode == http.StatusConflict || apiErr.Field == "id") {
				return fmt.Errorf("join via %s refused: %w", addr, err)
			}
			if err := raftPortGiven(addr, err); err != nil {
				return err
			}
			lastErr = err
			logger.Warn("join attempt failed", "via", addr, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join via %s: %w", strings.Join(addrs, ", "), lastErr)
		case <-time.After(time.Second):
		}
	}
}

// shutdown finishes in-flight HTTP and gRPC calls, then closes the node
// (which hands leadership over first if it leads).
func (s *servers) shutdown(logger *slog.Logger, node *cluster.Node) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s.grpc != nil {
		stopped := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			s.grpc.Stop()
		}
	}
	if err := s.http.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("HTTP shutdown", "err", err)
	}
	if err := node.Close(); err != nil {
		return fmt.Errorf("close node: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// advertiseHTTP is the HTTP address the other members and clients are told:
// the -advertise-http flag when given, else the address listened on, with
// the host of the Raft address (which must be reachable) in place of an
// unspecified one (0.0.0.0 or ::), which no one can dial.
func advertiseHTTP(listening, raftAddr, flagValue string) (string, error) {
	if flagValue != "" {
		if _, _, err := net.SplitHostPort(flagValue); err != nil {
			return "", &usageError{fmt.Sprintf("-advertise-http %q is not host:port", flagValue)}
		}
		return flagValue, nil
	}
	host, port, err := net.SplitHostPort(listening)
	if err != nil {
		return "", fmt.Errorf("HTTP listen address %s: %w", listening, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return listening, nil
	}
	raftHost, _, err := net.SplitHostPort(raftAddr)
	if err != nil || raftHost == "" || net.ParseIP(raftHost).IsUnspecified() {
		return "", &usageError{fmt.Sprintf("-http %s listens on every interface: give -advertise-http, the address others reach it at", listening)}
	}
	return net.JoinHostPort(raftHost, port), nil
}
