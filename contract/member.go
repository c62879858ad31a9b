package contract

import "net"

// MaxNodeIDBytes bounds a member's ID.
const MaxNodeIDBytes = 128

// Member is one member of the cluster: its ID, the Raft address the others
// reach it at, and the HTTP address it serves the API on (if it does).
type Member struct {
	ID       string
	RaftAddr string
	HTTPAddr string
}

// Validate checks a member to join: an ID of 1 to MaxNodeIDBytes bytes and
// a Raft address of the form host:port.
func (m *Member) Validate() *Error {
	if err := ValidateNodeID(m.ID); err != nil {
		return err
	}
	if m.RaftAddr == "" {
		return Invalid("raft_addr", "raft_addr is required")
	}
	if _, _, err := net.SplitHostPort(m.RaftAddr); err != nil {
		return Invalid("raft_addr", "raft_addr %q is not host:port", m.RaftAddr)
	}
	return nil
}

// ValidateNodeID checks a member's ID: 1 to MaxNodeIDBytes bytes.
func ValidateNodeID(id string) *Error {
	if id == "" || len(id) > MaxNodeIDBytes {
		return Invalid("id", "id is required and must be at most %d bytes", MaxNodeIDBytes)
	}
	return nil
}

// MemberChange loosens the checks that a change of members passes before
// it changes anything. The zero value keeps every check.
type MemberChange struct {
	// Replace lets a join evict a member with the same ID that still
	// answers at its recorded address: the operator means to replace a
	// running node.
	Replace bool
	// Force lets a change leave fewer reachable voters than a quorum of
	// the new configuration, so that the cluster decides nothing until
	// enough of them are back.
	Force bool
}

// MaxClusterIDBytes bounds a cluster's ID.
const MaxClusterIDBytes = 64

// ValidateClusterID checks a cluster's ID: 1 to MaxClusterIDBytes bytes of
// lower-case letters, digits and '-', so that it reads plainly in a log line
// and in JSON.
func ValidateClusterID(id string) *Error {
	if id == "" || len(id) > MaxClusterIDBytes {
		return Invalid("cluster_id", "a cluster ID is 1 to %d bytes", MaxClusterIDBytes)
	}
	for _, c := range []byte(id) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return Invalid("cluster_id", "a cluster ID holds only a-z, 0-9 and '-'")
		}
	}
	return nil
}
