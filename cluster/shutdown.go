package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/internal/testhooks"
)

func init() {
	testhooks.AbortNode = func(node io.Closer) error { return node.(*Node).shutdown(false) }
	testhooks.NodeDigest = func(node io.Closer) (uint64, [32]byte) { return node.(*Node).fsm.Digest() }
	testhooks.NodeLimitsDigest = func(node io.Closer) (uint64, [32]byte) { return node.(*Node).fsm.LimitsDigest() }
	testhooks.SkipRaiseWait = func(node io.Closer) { node.(*Node).skipRaiseWait.Store(true) }
	testhooks.BreakAppends = func(node io.Closer, fail, stall bool) { node.(*Node).appends.BreakAppends(fail, stall) }
}

// giveBackTimeout bounds how long a node that stops cleanly spends giving
// back the unspent units of its shares.
const giveBackTimeout = 2 * time.Second

// Close shuts the node down cleanly: the node gives back what it did not
// spend of its shares (for at most giveBackTimeout), a leader hands
// leadership to another voter (for at most TransferTimeout), then requests
// still pending fail with contract.ErrShutdown, heartbeats stop reaching
// Raft (once those under way are handled), Raft stops, the Raft port and
// its connections close, and the stores are closed.
func (n *Node) Close() error { return n.shutdown(true) }

// shutdown stops the node. Without transfer it is what a crash looks like to
// the cluster: no hand-over of leadership, pending requests fail. Every entry
// the node acknowledged is already on disk, so the node can be reopened from
// its DataDir (testhooks.AbortNode crashes a node this way).
func (n *Node) shutdown(transfer bool) error {
	n.closeOnce.Do(func() {
		if transfer {
			ctx, cancel := context.WithTimeout(context.Background(), giveBackTimeout)
			n.shares.giveBackAll(ctx)
			cancel()
		}
		if transfer && n.IsLeader() && n.members.otherVoters() > 0 {
			handOver(n.raft, n.cfg.TransferTimeout, n.logger)
		}
		close(n.stopCh)
		n.appends.BreakAppends(false, false) // an append a test holds would hold Raft's shutdown
		n.commit.stop()
		// Heartbeats stop reaching Raft before it stops, and Raft stops
		// before the stores close: past this point only Raft's own
		// goroutines touch the stores, and raft.Shutdown waits for those
		// (raftgate.go).
		n.transport.CloseGate()
		var errs []error
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
		}
		n.mux.Close()
		n.forwarding.closeConns()
		n.fwd.close()
		n.wg.Wait()
		n.stats.close()
		n.answeredHere.close()
		if err := n.transport.Close(); err != nil {
			errs = append(errs, fmt.Errorf("transport: %w", err))
		}
		if err := n.logStore.Close(); err != nil {
			errs = append(errs, fmt.Errorf("log store: %w", err))
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// handOver hands leadership over to another voter through r, waiting for
// it at most timeout.
func handOver(r *raft.Raft, timeout time.Duration, logger *slog.Logger) {
	done := make(chan error, 1)
	go func() { done <- r.LeadershipTransfer().Error() }()
	select {
	case err := <-done:
		if err != nil {
			logger.Warn("leadership transfer failed", "err", err)
		} else {
			logger.Info("handed leadership over")
		}
	case <-time.After(timeout):
		logger.Warn("leadership transfer timed out", "after", timeout)
	}
}
