package cluster

import (
	"errors"
	"fmt"

	"github.com/limitnode/limitnode/contract"
)

// Raft's own errors never leave this package: each is translated into one
// of contract's sentinels (contract.ErrNoLeader, ...) or, for a request
// refused as it stands, a *contract.Error.
var (
	// errNotLeader: the node asked is not the leader and did nothing, so
	// the request may be sent again to the leader. Never returned to
	// callers: Node retries until its deadline, then returns contract.ErrNoLeader.
	errNotLeader = errors.New("cluster: not the leader")
)

// errRemoved: this node was removed from the cluster, so it decides
// nothing until it is joined again.
var errRemoved = fmt.Errorf("%w: this node was removed from the cluster", contract.ErrNoLeader)
