package cluster

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// applyCommand appends one command that only the leader writes (not an
// allow batch, not a command a member asks for: see commandOnLeader) and
// returns its outcome: nil, a *contract.Error, or a translated Raft error.
func (n *Node) applyCommand(t fsm.CommandType, body any) error {
	data, err := fsm.Encode(t, body)
	if err != nil {
		return err
	}
	_, err = n.appendEntry(data)
	return err
}

// appendEntry appends an encoded command on the leader and returns its
// apply response (nil, or the command's result: a *fsm.LeaseResult, a
// *fsm.ResetResult), else the *contract.Error that refused it or a
// translated Raft error.
func (n *Node) appendEntry(data []byte) (any, error) {
	future := n.raft.Apply(data, n.requestTimeout)
	if err := n.awaitApplied(future); err != nil {
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
func (n *Node) awaitApplied(future raft.ApplyFuture) error {
	done := make(chan error, 1)
	go func() { done <- future.Error() }()
	select {
	case err := <-done:
		return err
	case <-n.stopCh:
		return fmt.Errorf("%w: %w", contract.ErrOutcomeUnknown, contract.ErrShutdown)
	}
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
