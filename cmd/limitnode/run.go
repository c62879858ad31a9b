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
	"strings"
	"sync"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/grpcapi"
	"github.com/limitnode/limitnode/httpapi"
	"github.com/limitnode/limitnode/internal/guard"
)

// run starts the node and serves until ctx ends, then shuts down cleanly.
// ready, if not nil, receives the HTTP address once the node serves.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready chan<- string) error {
	c, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sec, err := loadSecurity(c.security, logger)
	if err != nil {
		return err
	}
	seed, err := readSeed(c)
	if err != nil {
		return err
	}

	rawHTTP, err := net.Listen("tcp", c.httpAddr)
	if err != nil {
		return fmt.Errorf("listen for HTTP: %w", err)
	}
	// The HTTP server's own timeouts close idle connections; the guard caps
	// how many are open at once.
	httpListener := guard.Wrap(rawHTTP, c.maxHTTPConns, 0, logger)
	defer httpListener.Close()
	httpAddr := httpListener.Addr().String()
	advertised, err := advertiseHTTP(httpAddr, cmp.Or(c.advertiseRaft, c.raftAddr), c.advertiseHTTP)
	if err != nil {
		return err
	}

	var joinAddrs []string
	for a := range strings.SplitSeq(c.join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			joinAddrs = append(joinAddrs, a)
		}
	}
	node, err := cluster.Open(cluster.Config{
		ID:               c.id,
		RaftAddr:         c.raftAddr,
		RaftAdvertise:    c.advertiseRaft,
		HTTPAddr:         advertised,
		DataDir:          c.dataDir,
		SnapshotDir:      c.snapshotDir,
		Bootstrap:        len(joinAddrs) == 0 && c.expect == 0,
		Logger:           logger,
		RaftLogLevel:     c.raftLogLevel,
		MaxKeys:          c.maxKeys,
		NoSync:           c.noSync,
		KeyLimitFailOpen: c.keyLimitMode == "allow",
		NodeTLS:          sec.nodeTLS,
		MaxRaftConns:     c.maxRaftConns,
		RaftIdleTimeout:  c.raftIdle,
	})
	if err != nil {
		return err
	}
	trusted, err := c.trustedProxies()
	if err != nil {
		return err
	}
	apiOpts := httpapi.Options{Logger: logger, TrustedProxies: trusted, Collectors: node.Collectors()}
	grpcOpts := grpcapi.Options{Logger: logger, TLS: sec.httpTLS}
	if sec.authz != nil {
		apiOpts.Authorizer, grpcOpts.Authorizer = sec.authz, sec.authz
	}
	serveErr := make(chan error, 2)
	var grpcServer *grpcapi.Server
	if c.grpcAddr != "" {
		ln, err := net.Listen("tcp", c.grpcAddr)
		if err != nil {
			_ = node.Close()
			return fmt.Errorf("listen for gRPC: %w", err)
		}
		grpcListener := guard.Wrap(ln, c.maxHTTPConns, 0, logger)
		grpcServer = grpcapi.New(node, grpcOpts)
		apiOpts.Collectors = append(apiOpts.Collectors, grpcServer.Collectors()...)
		defer grpcServer.Stop()
		go func() { serveErr <- fmt.Errorf("gRPC server: %w", grpcServer.Serve(grpcListener)) }()
		logger.Info("serving gRPC", "grpc", grpcListener.Addr().String())
	}
	server := httpapi.NewServer(httpAddr, httpapi.New(httpBackend(node), apiOpts))
	if sec.httpTLS != nil {
		server.TLSConfig = sec.httpTLS
		go func() { serveErr <- server.ServeTLS(httpListener, "", "") }()
	} else {
		go func() { serveErr <- server.Serve(httpListener) }()
	}
	logger.Info("limitnode serving", "id", c.id, "http", httpAddr, "advertised_http", advertised, "raft", node.RaftAddr(), "data", c.dataDir,
		"https", sec.httpTLS != nil, "raft_tls", sec.nodeTLS != nil, "tokens", sec.authz != nil)
	warnIfExposed(logger, c, sec)

	self := client.Member{ID: c.id, RaftAddr: node.RaftAddr(), HTTPAddr: advertised}
	joinOpts := client.Options{TLS: sec.joinTLS, Token: c.joinToken}
	formCtx, stopForming := context.WithCancel(ctx)
	var forming sync.WaitGroup
	defer forming.Wait()
	defer stopForming()
	switch {
	case node.HadState():
		if len(joinAddrs) > 0 {
			logger.Info("-join and -bootstrap-expect ignored: this node restarts into the cluster it belonged to")
		}
		if !seed.empty() {
			logger.Info(seedIgnored)
		}
	case c.expect > 0:
		// The node serves (its view answers the others) while the cluster
		// forms; /readyz says 503 until it has.
		forming.Go(func() {
			formed, err := formCluster(formCtx, logger, node, joinAddrs, c.expect, joinOpts, self)
			if err != nil || !formed || seed.empty() {
				return
			}
			// Storing a policy or a domain again is harmless: try until
			// it holds.
			for {
				err := seed.store(formCtx, node, logger)
				if err == nil {
					return
				}
				logger.Error("storing -policies and -rls-config failed; trying again", "err", err)
				select {
				case <-formCtx.Done():
					return
				case <-time.After(time.Second):
				}
			}
		})
	case len(joinAddrs) > 0:
		if err := joinCluster(ctx, logger, joinAddrs, joinOpts, self, client.MemberChange{Replace: c.replace}, c.joinTimeout); err != nil {
			shutdown(logger, server, grpcServer, node)
			return err
		}
		if !seed.empty() {
			logger.Info(seedIgnored)
		}
	case !seed.empty():
		if err := seed.store(ctx, node, logger); err != nil {
			shutdown(logger, server, grpcServer, node)
			return err
		}
	}
	if ready != nil {
		ready <- httpAddr
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-serveErr:
		logger.Error("a server stopped", "err", err)
	}
	stopForming()
	forming.Wait()
	return shutdown(logger, server, grpcServer, node)
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
func shutdown(logger *slog.Logger, server *http.Server, grpcServer *grpcapi.Server, node *cluster.Node) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if grpcServer != nil {
		stopped := make(chan struct{})
		go func() { grpcServer.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			grpcServer.Stop()
		}
	}
	if err := server.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
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

// httpBackend is the node in every job of the HTTP API.
func httpBackend(node *cluster.Node) httpapi.Backend {
	return httpapi.Backend{Decider: node, Policies: node, RLS: node, Leases: node, Membership: node, Backups: node, Observer: node}
}
