package contract

// MemberStatus is one member as this node sees it.
type MemberStatus struct {
	Member
	Voter  bool
	Leader bool
}

// Status is this node's view of the cluster.
type Status struct {
	// SelfID is this node's ID.
	SelfID string
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
}
