package cluster

import (
	"errors"
	"fmt"

	"github.com/limitnode/limitnode/cluster/internal/identity"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/transport"
)

// ErrWrongDirectory means the data directory belongs to another node: its
// Raft state (votes, log, membership) is that node's, and a node under
// another ID on it would answer as a stranger to its own cluster.
var ErrWrongDirectory = identity.ErrWrongDirectory

// ErrForeignCluster means two nodes belong to different clusters: a node was
// started on another cluster's data directory, or asked to join a cluster
// it is not part of. They refuse each other on every connection.
var ErrForeignCluster = transport.ErrForeignCluster

// Raft's own errors never leave this package: each is translated into one
// of contract's sentinels (contract.ErrNoLeader, ...) or, for a request
// refused as it stands, a *contract.Error.
var (
	// errNotLeader: the node asked is not the leader and did nothing, so
	// the request may be sent again to the leader. Never returned to
	// callers: Node retries until its deadline, then returns contract.ErrNoLeader.
	errNotLeader = errors.New("cluster: not the leader")
)

// removedAdvice is what an operator can do about a node that was removed
// from its cluster.
const removedAdvice = "to make it a member again, join it through a member (limitnode join -id ID -raft RAFT_ADDR -addr MEMBER); to retire it, stop it"

// errRemoved: this node was removed from the cluster, so it decides
// nothing until it is joined again. It is an ErrNotMember: the caller asks
// another node.
var errRemoved = fmt.Errorf("%w: it was removed from the cluster and decides nothing; %s", contract.ErrNotMember, removedAdvice)
