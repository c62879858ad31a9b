// Command limitnode runs one node of a limitnode cluster: the HTTP API of
// the README on -http, Raft on -raft, state under -data.
//
// With no flags it starts a single-node cluster on 127.0.0.1:7070, keeping
// its state in ./limitnode-data. Every flag can also be set with an
// environment variable LIMITNODE_<NAME> (LIMITNODE_HTTP, LIMITNODE_LOG_LEVEL,
// ...); a flag on the command line wins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/httpapi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "limitnode:", err)
		os.Exit(1)
	}
}

// config is the command's configuration, from flags and environment.
type config struct {
	id           string
	httpAddr     string
	raftAddr     string
	dataDir      string
	snapshotDir  string
	join         string
	logLevel     string
	raftLogLevel string
	joinTimeout  time.Duration
	policiesFile string
	maxKeys      int64
	keyLimitMode string
	noSync       bool
}

// parseConfig reads flags from args, taking a flag's default from
// LIMITNODE_<NAME> when that variable is set.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("limitnode", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&c.id, "id", "node1", "node ID, unique in the cluster")
	fs.StringVar(&c.httpAddr, "http", "127.0.0.1:7070", "HTTP listen address")
	fs.StringVar(&c.raftAddr, "raft", "127.0.0.1:7071", "Raft listen (and advertised) address")
	fs.StringVar(&c.dataDir, "data", "./limitnode-data", "data directory (Raft log, stable store, snapshots)")
	fs.StringVar(&c.snapshotDir, "snapshot-dir", "", "keep snapshots here instead of in -data (another disk keeps their writes from delaying the log's)")
	fs.StringVar(&c.join, "join", "", "comma-separated HTTP addresses of existing members; omit to start (or restart) on your own")
	fs.StringVar(&c.logLevel, "log-level", "info", "least level logged: debug, info, warn or error")
	fs.StringVar(&c.raftLogLevel, "raft-log-level", "warn", "least level of Raft's own logs: debug, info, warn or error")
	fs.DurationVar(&c.joinTimeout, "join-timeout", time.Minute, "how long to keep trying the -join addresses")
	fs.BoolVar(&c.noSync, "no-sync", false, "do not fsync the Raft log on each append: faster, but a simultaneous power loss of a majority can lose the last decisions")
	fs.Int64Var(&c.maxKeys, "max-keys", cluster.DefaultMaxKeys, "most live (key, limit) pairs the cluster keeps; -1 for no cap")
	fs.StringVar(&c.keyLimitMode, "key-limit-mode", "deny", "when -max-keys is reached, new keys are refused (deny: 503) or admitted unrecorded (allow)")
	fs.StringVar(&c.policiesFile, "policies", "", "JSON file of named policies to store when this node bootstraps a new cluster")
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "LIMITNODE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(name); v != "" {
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return c, envErr
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if c.keyLimitMode != "deny" && c.keyLimitMode != "allow" {
		return c, fmt.Errorf("-key-limit-mode must be deny or allow, not %q", c.keyLimitMode)
	}
	return c, nil
}

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
	var policies []contract.Policy
	if c.policiesFile != "" {
		if policies, err = readPolicyFile(c.policiesFile); err != nil {
			return err
		}
	}

	httpListener, err := net.Listen("tcp", c.httpAddr)
	if err != nil {
		return fmt.Errorf("listen for HTTP: %w", err)
	}
	defer httpListener.Close()
	httpAddr := httpListener.Addr().String()

	var joinAddrs []string
	for a := range strings.SplitSeq(c.join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			joinAddrs = append(joinAddrs, a)
		}
	}
	node, err := cluster.Open(cluster.Config{
		ID:               c.id,
		RaftAddr:         c.raftAddr,
		HTTPAddr:         httpAddr,
		DataDir:          c.dataDir,
		SnapshotDir:      c.snapshotDir,
		Bootstrap:        len(joinAddrs) == 0,
		Logger:           logger,
		RaftLogLevel:     c.raftLogLevel,
		MaxKeys:          c.maxKeys,
		NoSync:           c.noSync,
		KeyLimitFailOpen: c.keyLimitMode == "allow",
	})
	if err != nil {
		return err
	}
	server := httpapi.NewServer(httpAddr, httpapi.New(node, httpapi.Options{Logger: logger}))
	serveErr := make(chan error, 1)
	go func() { serveErr <- server.Serve(httpListener) }()
	logger.Info("limitnode serving", "id", c.id, "http", httpAddr, "raft", node.RaftAddr(), "data", c.dataDir)

	if len(joinAddrs) > 0 && !node.HadState() {
		if err := joinCluster(ctx, logger, joinAddrs, client.Member{ID: c.id, RaftAddr: node.RaftAddr(), HTTPAddr: httpAddr}, c.joinTimeout); err != nil {
			shutdown(logger, server, node)
			return err
		}
	} else if len(joinAddrs) > 0 {
		logger.Info("-join ignored: this node restarts into the cluster it belonged to")
	}
	if len(policies) > 0 && len(joinAddrs) == 0 && !node.HadState() {
		if err := seedPolicies(ctx, node, policies); err != nil {
			shutdown(logger, server, node)
			return err
		}
		logger.Info("stored the policies of the policy file", "count", len(policies), "file", c.policiesFile)
	} else if len(policies) > 0 {
		logger.Info("-policies ignored: policies are seeded only when a node bootstraps a new cluster; change them with PUT /v1/policies/{name}")
	}
	if ready != nil {
		ready <- httpAddr
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-serveErr:
		logger.Error("HTTP server stopped", "err", err)
	}
	return shutdown(logger, server, node)
}

// joinCluster asks each address in turn to add this node, until one accepts
// or the timeout passes; the members may still be starting.
func joinCluster(ctx context.Context, logger *slog.Logger, addrs []string, self client.Member, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var lastErr error
		for _, addr := range addrs {
			err := client.New(&http.Client{Timeout: 10 * time.Second}, addr).Join(ctx, self)
			if err == nil {
				logger.Info("joined the cluster", "via", addr)
				return nil
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

func readPolicyFile(path string) ([]contract.Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-policies: %w", err)
	}
	defer f.Close()
	return httpapi.ParsePolicyFile(f)
}

// seedPolicies stores the policy file's policies in a cluster this node has
// just bootstrapped, once it leads.
func seedPolicies(ctx context.Context, node *cluster.Node, policies []contract.Policy) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, p := range policies {
		if err := node.PutPolicy(ctx, p); err != nil {
			return fmt.Errorf("store policy %q: %w", p.Name, err)
		}
	}
	return nil
}

// shutdown finishes in-flight HTTP requests, then closes the node (which
// hands leadership over first if it leads).
func shutdown(logger *slog.Logger, server *http.Server, node *cluster.Node) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := server.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("HTTP shutdown", "err", err)
	}
	if err := node.Close(); err != nil {
		return fmt.Errorf("close node: %w", err)
	}
	logger.Info("stopped")
	return nil
}
