package contract

import "time"

// MemberStatus is one member as this node sees it.
type MemberStatus struct {
	Member
	Voter  bool
	Leader bool
	// Health is what the leader last learnt of the member (the leader's
	// own view where the leader answers), or nil while nothing is known.
	Health *MemberHealth
}

// MemberHealth is the leader's view of a member: the leader asks every
// member each second.
type MemberHealth struct {
	// Reachable is whether the member answered the leader's latest ask.
	Reachable bool
	// SinceContact is how long ago it last answered (0 for the leader;
	// negative if it never has).
	SinceContact time.Duration
	// AppliedIndex is the member's applied index at its last answer, and
	// Lag how far that trailed the leader's at the time.
	AppliedIndex uint64
	Lag          uint64
	// DivergedAt, when not 0, is the log index of a checkpoint at which
	// the member's state differed from the leader's.
	DivergedAt uint64
}

// ConsistencyReport says which members hold the same state as the leader at
// one log index (a checkpoint).
type ConsistencyReport struct {
	Index   uint64
	Members []MemberConsistency
}

// MemberConsistency is one member's part of a ConsistencyReport.
type MemberConsistency struct {
	ID string
	// Agrees is whether the member's digest at the checkpoint equals the
	// leader's; nil when it did not answer in time.
	Agrees *bool
}

// Status is this node's view of the cluster.
type Status struct {
	// SelfID is this node's ID.
	SelfID string
	// SelfRaftAddr is the address the other members reach this node's Raft
	// port at, whether or not it is a member yet.
	SelfRaftAddr string
	// ClusterID is the ID of the cluster this node belongs to, or "" while
	// it knows none.
	ClusterID string
	// LeaderID is the leader's ID, or "" while none is known.
	LeaderID     string
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	Members      []MemberStatus
	// LastSnapshotIndex is the log index of this node's latest snapshot
	// (0 when it has none).
	LastSnapshotIndex uint64
	// Keys is the number of (key, limit) pairs with live state.
	Keys int
	// Leases and LeaseWaiters are the leases held and the requests
	// waiting in lease queues, in this node's copy.
	Leases       int
	LeaseWaiters int
	// Blocked is how many keys are blocked now, and BlockedByPenalty how
	// many of them a policy's penalty blocked, in this node's copy.
	Blocked, BlockedByPenalty int
}
