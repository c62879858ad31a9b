package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/httpapi"
	"github.com/limitnode/limitnode/rls"
)

// seed is what a node stores when it bootstraps a new cluster: the
// policies of -policies and the rate limit service domains of -rls-config.
// A node that restarts or joins ignores -policies: the cluster already
// holds its policies, changed through the API since. -rls-config is
// watched after that on every node (rlsWatch), so a domain is in force
// once the node that bootstraps is ready.
type seed struct {
	policies []contract.Policy
	domains  []rls.Config
}

// seedActor is who the audit trail says stored the seed.
const seedActor = "seed"

const seedIgnored = "-policies NOT applied: it is stored only when a node bootstraps a new cluster, and this node restarted into or joined one, so the cluster keeps the policies it has; to change them, run limitnode policy put NAME FILE (through the log, to every node)"

// readSeed reads and validates the files of -policies and -rls-config, so
// that a mistake stops the node before it starts. A broken -rls-config
// stops only a node that may form a new cluster (rlsConfigNeeded): one
// that restarts into its cluster or joins one starts without it, the
// cluster keeping the domains it has, and its watch (rlsWatch) says what
// is wrong until the file is mended, as it does for a file broken while
// the node runs.
func readSeed(c config, logger *slog.Logger) (seed, error) {
	var s seed
	if c.policiesFile != "" {
		f, err := os.Open(c.policiesFile)
		if err != nil {
			return s, fmt.Errorf("-policies: %w", err)
		}
		defer f.Close()
		if s.policies, err = httpapi.ParsePolicyFile(f); err != nil {
			return s, fmt.Errorf("-policies %s: %w", c.policiesFile, err)
		}
	}
	if c.rlsConfig != "" {
		var err error
		if s.domains, err = readRLSConfigs(c.rlsConfig); err != nil {
			if rlsConfigNeeded(c) {
				return s, fmt.Errorf("-rls-config: %w", err)
			}
			logger.Error("-rls-config is invalid: this node restarts into or joins a cluster, which keeps the domains it has; the file is applied once mended", "err", err)
		}
	}
	return s, nil
}

// rlsConfigNeeded reports whether this node may form a new cluster, whose
// domains are -rls-config's: its data directory holds no Raft log
// (raft.db), and it does not only join (-join without -bootstrap-expect).
func rlsConfigNeeded(c config) bool {
	if _, err := os.Stat(filepath.Join(c.dataDir, "raft.db")); err == nil {
		return false
	}
	return len(splitAddrs(c.join)) == 0 || c.expect > 0
}

func (s seed) empty() bool { return len(s.policies) == 0 && len(s.domains) == 0 }

// store writes the seed through the cluster once this node leads.
func (s seed) store(ctx context.Context, node *cluster.Node, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ctx = contract.WithActor(ctx, seedActor)
	for _, p := range s.policies {
		if err := node.PutPolicy(ctx, p); err != nil {
			return fmt.Errorf("store policy %q: %w", p.Name, err)
		}
	}
	for _, c := range s.domains {
		if err := node.PutRLSConfig(ctx, c); err != nil {
			return fmt.Errorf("store rate limit service domain %q: %w", c.Domain, err)
		}
	}
	logger.Info("stored -policies and -rls-config", "policies", len(s.policies), "domains", len(s.domains))
	return nil
}
