package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/cluster/internal/clusterclock"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// replica is this node's Raft and its state machine, as the decision path,
// the reads and the operations on the leader use them: whether it leads,
// appending a command and waiting for its outcome, the time a leader
// stamps, and how far the state machine has applied.
type replica struct {
	raft     *raft.Raft
	fsm      *fsm.FSM
	logStore raft.LogStore
	clock    *clusterclock.Clock
	// timeout bounds an append (Config.RequestTimeout).
	timeout time.Duration
	// stop is closed when the node stops.
	stop <-chan struct{}
	// confirm shares rounds of leadership confirmation among the reads
	// and fast denials that wait for one.
	confirm *confirmer
	// barrierTerm is the term in which this node last ran a barrier as
	// leader (termBarrier).
	barrierTerm atomic.Uint64
}

func (r *replica) isLeader() bool { return r.raft.State() == raft.Leader }

// stopped reports whether the node is closing.
func (r *replica) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// applyCommand appends one command that only the leader writes (not an
// allow batch, not a command a member asks for: see commandOnLeader) and
// returns its outcome: nil, a *contract.Error, or a translated Raft error.
func (r *replica) applyCommand(t fsm.CommandType, body any) error {
	data, err := fsm.Encode(t, body)
	if err != nil {
		return err
	}
	_, err = r.appendEntry(data)
	return err
}

// appendEntry appends an encoded command on the leader and returns its
// apply response (nil, or the command's result: a *fsm.LeaseResult, a
// *fsm.ResetResult), else the *contract.Error that refused it or a
// translated Raft error.
func (r *replica) appendEntry(data []byte) (any, error) {
	future := r.raft.Apply(data, r.timeout)
	if err := r.awaitApplied(future); err != nil {
		return nil, translate(err)
	}
	switch resp := future.Response().(type) {
	case nil:
		return nil, nil
	case *contract.Error:
		return nil, resp
	case *fsm.LeaseResult:
		if resp.Rejection != nil {
			return nil, resp.Rejection
		}
		return resp, nil
	case error:
		return nil, fmt.Errorf("cluster: apply: %w", resp)
	default:
		return resp, nil
	}
}

// awaitApplied waits for an appended command's outcome, or for this node to
// stop. With BatchApplyCh, a command still in Raft's apply queue when Raft
// shuts down is never answered (hashicorp/raft#498); a forwarded command
// waiting for it would hold the node's shutdown forever. When the node
// stops first, the outcome is unknown.
func (r *replica) awaitApplied(future raft.ApplyFuture) error {
	done := make(chan error, 1)
	go func() { done <- future.Error() }()
	select {
	case err := <-done:
		return err
	case <-r.stop:
		return fmt.Errorf("%w: %w", contract.ErrOutcomeUnknown, contract.ErrShutdown)
	}
}

// leaderStamp returns the time to stamp on an entry this leader appends.
// A new leader first applies everything earlier leaders committed (a
// barrier), so its clock starts from the latest cluster time (clock.go).
// Its errors mean nothing was appended: errNotLeader or contract.ErrShutdown.
func (r *replica) leaderStamp() (int64, error) {
	term := r.raft.CurrentTerm()
	if err := r.termBarrier(term); err != nil {
		return 0, err
	}
	return r.stampIn(term), nil
}

// termBarrier returns once this leader has applied an entry of term, its
// own: everything earlier leaders committed is then applied here, and its
// commit index is the cluster's (a Raft barrier, once per term). Its errors
// mean nothing was appended: errNotLeader or contract.ErrShutdown.
func (r *replica) termBarrier(term uint64) error {
	if r.barrierTerm.Load() == term {
		return nil
	}
	if err := r.raft.Barrier(r.timeout).Error(); err != nil {
		if errors.Is(err, raft.ErrRaftShutdown) {
			return contract.ErrShutdown
		}
		return errNotLeader
	}
	r.barrierTerm.Store(term)
	return nil
}

// stampIn is the time this leader stamps now in term: its clock's, within
// what the state machine accepts after the latest time it applied.
func (r *replica) stampIn(term uint64) int64 {
	last := r.fsm.Now()
	return fsm.ClampStamp(r.clock.Stamp(term, last), last)
}

// hasApplied reports whether the state machine holds every entry up to
// index. It sees only commands and configurations (hashicorp/raft keeps
// its barriers and no-ops from a BatchingFSM), so when the last entries
// are of those kinds its own index stays below Raft's: the entries after
// it are read from the log store to tell, and those a snapshot replaced
// count as applied. Raft's AppliedIndex alone is not enough: it counts an
// entry once it is handed to the state machine, before it is applied.
func (r *replica) hasApplied(index uint64) bool {
	for i := r.fsm.LastIndex() + 1; i <= index; i++ {
		var l raft.Log
		if err := r.logStore.GetLog(i, &l); err != nil {
			snapshot, _ := strconv.ParseUint(r.raft.Stats()["last_snapshot_index"], 10, 64)
			if snapshot < i {
				return false
			}
			i = snapshot
			continue
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return false
		}
	}
	return true
}

// waitApplied returns once this node's state machine holds every entry up
// to index, or an error wrapping contract.ErrNoLeader when ctx ends first.
// It polls from 50 µs up to 5 ms: a read arriving on a busy node usually
// finds its index applied within an entry's apply.
func (r *replica) waitApplied(ctx context.Context, index uint64) error {
	for wait := 50 * time.Microsecond; r.raft.AppliedIndex() < index || !r.hasApplied(index); wait = min(2*wait, 5*time.Millisecond) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: this node did not apply the leader's read index %d in time", contract.ErrNoLeader, index)
		case <-r.stop:
			return contract.ErrShutdown
		case <-time.After(wait):
		}
	}
	return nil
}

// notApplied reports whether a Raft apply error guarantees that the entry
// was never appended, so the request may go to another leader.
func notApplied(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		errors.Is(err, raft.ErrEnqueueTimeout)
}

// translate maps Raft's errors to this package's.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case notApplied(err):
		return errNotLeader
	case errors.Is(err, raft.ErrRaftShutdown):
		return contract.ErrShutdown
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %w", contract.ErrOutcomeUnknown, err)
	default:
		return fmt.Errorf("cluster: raft: %w", err)
	}
}

// confirmer shares rounds of leadership confirmation among the requests
// that wait for one: a request waits for a round that starts after it
// asked, so the leadership it confirms is leadership after the request
// arrived.
type confirmer struct {
	verify  func() error
	mu      sync.Mutex
	waiting []chan error
	running bool
}

// leadership returns nil once a round started after the call has
// confirmed that this node leads.
func (c *confirmer) leadership(ctx context.Context) error {
	done := make(chan error, 1)
	c.mu.Lock()
	c.waiting = append(c.waiting, done)
	if !c.running {
		c.running = true
		go c.rounds()
	}
	c.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rounds confirms for everyone waiting, round after round, until no one
// is.
func (c *confirmer) rounds() {
	for {
		c.mu.Lock()
		round := c.waiting
		c.waiting = nil
		if len(round) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		err := c.verify()
		for _, done := range round {
			done <- err
		}
	}
}
