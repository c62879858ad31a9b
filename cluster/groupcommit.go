package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/transport"
)

// The allow path: a request goes to the leader's group commit (batcher.go),
// here if this node leads, by forwarding otherwise. Each batcher's flush is
// below: the leader's appends one Raft entry, a follower's sends one
// forwarding message.

// decideOnLeader sends requests through the leader's group commit, locally
// or by forwarding, and retries only where nothing can have been applied.
func (n *Node) decideOnLeader(ctx context.Context, reqs []fsm.Request) ([]fsm.Result, string, error) {
	type decided struct {
		results []fsm.Result
		leader  string
	}
	if n.members.isRemoved() {
		return nil, "", errRemoved
	}
	d, err := onLeader(ctx, n, false, func(ctx context.Context) (decided, error) {
		if n.isLeader() {
			if results, ok := n.denyFast(ctx, reqs); ok {
				return decided{results, n.cfg.ID}, nil
			}
			results, leader, err := n.submitToLog(ctx, reqs)
			return decided{results, leader}, err
		}
		b := n.followerBatch
		if n.likelyDenied(reqs) {
			b = n.followerDenials
		}
		results, leader, err := b.submit(ctx, reqs)
		return decided{results, leader}, err
	})
	return d.results, d.leader, err
}

// applyBatch is the leader's flush: one Raft entry for all the calls. It
// releases the pipeline once the entry is in the leader's own log (or its
// outcome is known), so that the next entry is appended while this one
// replicates.
func (n *Node) applyBatch(calls []*call, release func()) {
	reqs := concatRequests(calls)
	stamp, err := n.leaderStamp()
	if err != nil {
		failAll(calls, err) // nothing of the batch was appended
		return
	}
	data, err := fsm.Encode(fsm.CommandAllow, &fsm.AllowCommand{
		NowNanos: stamp, Requests: reqs, MaxKeys: max(n.cfg.MaxKeys, 0), KeyLimitFailOpen: n.cfg.KeyLimitFailOpen,
		MaxIDsPerCaller: max(n.cfg.MaxRequestIDsPerCaller, 0),
	})
	if err != nil {
		failAll(calls, err)
		return
	}
	start := time.Now()
	appended, forget := n.appendedEntries.expect(data)
	outcome := make(chan struct{})
	go func() {
		select {
		case <-appended:
		case <-outcome:
		}
		release()
	}()
	future := n.raft.Apply(data, n.requestTimeout)
	err = n.awaitApplied(future)
	forget()
	close(outcome)
	if err != nil {
		if notApplied(err) {
			failAll(calls, errNotLeader)
		} else {
			failAmbiguous(calls, err)
		}
		return
	}
	since(n.metrics.commit, start)
	switch resp := future.Response().(type) {
	case *fsm.Response:
		n.denied.note(reqs, resp.Results)
		distribute(calls, resp.Results, n.cfg.ID)
	case error:
		failAll(calls, fmt.Errorf("cluster: apply: %w", resp))
	default:
		failAll(calls, fmt.Errorf("cluster: apply returned %T", resp))
	}
}

// leaderStamp returns the time to stamp on an entry this leader appends.
// A new leader first applies everything earlier leaders committed (a
// barrier), so its clock starts from the latest cluster time (cluster/internal/clusterclock).
// Its errors mean nothing was appended: errNotLeader or contract.ErrShutdown.
func (n *Node) leaderStamp() (int64, error) {
	term := n.raft.CurrentTerm()
	if err := n.termBarrier(term); err != nil {
		return 0, err
	}
	return n.stampIn(term), nil
}

// termBarrier returns once this leader has applied an entry of term, its
// own: everything earlier leaders committed is then applied here, and its
// commit index is the cluster's (a Raft barrier, once per term). Its errors
// mean nothing was appended: errNotLeader or contract.ErrShutdown.
func (n *Node) termBarrier(term uint64) error {
	if n.barrierTerm.Load() == term {
		return nil
	}
	if err := n.raft.Barrier(n.requestTimeout).Error(); err != nil {
		if errors.Is(err, raft.ErrRaftShutdown) {
			return contract.ErrShutdown
		}
		return errNotLeader
	}
	n.barrierTerm.Store(term)
	return nil
}

// stampIn is the time this leader stamps now in term: its clock's, within
// what the state machine accepts after the latest time it applied.
func (n *Node) stampIn(term uint64) int64 {
	last := n.fsm.Now()
	return fsm.ClampStamp(n.clock.Stamp(term, last), last)
}

// forwardBatch is a follower's flush: one message to the leader for all the
// calls.
func (n *Node) forwardBatch(calls []*call, _ func()) {
	addr, id := n.raft.LeaderWithID()
	if addr == "" || string(id) == n.cfg.ID {
		failAll(calls, errNotLeader)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.requestTimeout)
	defer cancel()
	start := time.Now()
	resp, err := n.fwd.send(ctx, string(addr), &forwardRequest{Op: opAllow, Requests: concatRequests(calls)})
	since(n.metrics.forward, start)
	switch {
	case errors.Is(err, transport.ErrNotSent):
		failAll(calls, errNotLeader)
	case err != nil:
		failAmbiguous(calls, err)
	case resp.Status == statusUnknown:
		failAmbiguous(calls, errorFor(resp))
	case resp.Status != statusOK:
		failAll(calls, errorFor(resp))
	default:
		distribute(calls, resp.Results, string(id))
	}
}

// notApplied reports whether a Raft apply error guarantees that the entry
// was never appended, so the request may go to another leader.
func notApplied(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		errors.Is(err, raft.ErrEnqueueTimeout)
}

func concatRequests(calls []*call) []fsm.Request {
	if len(calls) == 1 {
		return calls[0].requests
	}
	size := 0
	for _, c := range calls {
		size += len(c.requests)
	}
	reqs := make([]fsm.Request, 0, size)
	for _, c := range calls {
		reqs = append(reqs, c.requests...)
	}
	return reqs
}

func distribute(calls []*call, results []fsm.Result, leader string) {
	if len(results) != len(concatRequests(calls)) {
		failAll(calls, fmt.Errorf("cluster: %d results for %d requests", len(results), len(concatRequests(calls))))
		return
	}
	for _, c := range calls {
		c.results, results = results[:len(c.requests):len(c.requests)], results[len(c.requests):]
		c.leader = leader
	}
}

func failAll(calls []*call, err error) {
	for _, c := range calls {
		c.err = err
	}
}

// failAmbiguous answers calls whose outcome is unknown. A call whose every
// request carries an ID is safe to send again, since the FSM answers a
// repeated ID with its first result; the others get contract.ErrOutcomeUnknown.
func failAmbiguous(calls []*call, cause error) {
	for _, c := range calls {
		c.err = fmt.Errorf("%w: %w", contract.ErrOutcomeUnknown, cause)
		if allHaveIDs(c.requests) {
			c.err = errNotLeader
		}
	}
}

func allHaveIDs(reqs []fsm.Request) bool {
	for _, r := range reqs {
		if r.RequestID == "" {
			return false
		}
	}
	return true
}
