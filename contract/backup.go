package contract

import "io"

// BackupInfo describes a backup: the log index whose state it holds, and the
// digest of that limits state (buckets, request IDs, policies, leases and
// time; not the members' addresses), which a cluster restored from it holds
// too.
type BackupInfo struct {
	Index        uint64
	LimitsDigest [32]byte
	// ClusterID is the ID of the cluster the backup was taken from ("" for
	// a file that does not say). A cluster restored from it keeps its own.
	ClusterID string
}

// Backup is a node's state frozen for a backup file.
type Backup interface {
	// Info describes the state.
	Info() BackupInfo
	// Write writes the backup file.
	Write(w io.Writer) error
}

// NotLeaderError is what an operation that only the leader runs (a
// restore) answers elsewhere: LeaderHTTPAddr is where to send it, when
// known.
type NotLeaderError struct{ LeaderHTTPAddr string }

func (e *NotLeaderError) Error() string {
	if e.LeaderHTTPAddr == "" {
		return "this node is not the leader, and no leader is known"
	}
	return "this node is not the leader; send it to the leader at " + e.LeaderHTTPAddr
}
