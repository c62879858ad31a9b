package wire

// Member is a member of the cluster: its ID, the Raft address the others
// reach it at and the HTTP address it serves the API on.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// JoinRequest is the body of POST /v1/cluster/join: the member, and the
// checks the operator lifts on purpose.
type JoinRequest struct {
	Member
	// Replace evicts a member with the same ID that still answers at
	// another address.
	Replace bool `json:"replace,omitempty"`
	// Force joins even if fewer voters than a quorum would answer.
	Force bool `json:"force,omitempty"`
}

// Node is one member in GET /v1/cluster, with what the leader last learnt
// of it (absent while unknown).
type Node struct {
	Member
	Voter         bool    `json:"voter"`
	Leader        bool    `json:"leader"`
	Reachable     *bool   `json:"reachable,omitempty"`
	LastContactMS *int64  `json:"last_contact_ms,omitempty"`
	AppliedIndex  *uint64 `json:"applied_index,omitempty"`
	Lag           *uint64 `json:"lag,omitempty"`
	DivergedAt    uint64  `json:"diverged_at,omitempty"`
}

// Cluster is the body of GET /v1/cluster: the answering node's view.
type Cluster struct {
	// Self is the answering node's ID, SelfRaftAddr its Raft address,
	// member or not.
	Self         string `json:"self"`
	SelfRaftAddr string `json:"self_raft_addr"`
	// ClusterID is the ID of the answering node's cluster; empty while it
	// knows none (it is being joined).
	ClusterID    string `json:"cluster_id,omitempty"`
	Leader       string `json:"leader"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Nodes        []Node `json:"nodes"`
}

// Consistency is the body of a POST /v1/cluster/consistency answer: the
// checkpoint's index and, per member, whether its state agrees with the
// leader's there (absent when it did not answer).
type Consistency struct {
	Index   uint64              `json:"index"`
	Members []MemberConsistency `json:"members"`
}

// MemberConsistency is one member of a Consistency report.
type MemberConsistency struct {
	ID     string `json:"id"`
	Agrees *bool  `json:"agrees,omitempty"`
}

// TransferRequest is the body of POST /v1/cluster/transfer-leadership: the
// member to lead next, or "" for any other voter.
type TransferRequest struct {
	To string `json:"to,omitempty"`
}

// Readiness is the body of /readyz: "ready", or "not ready" and why.
type Readiness struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}
