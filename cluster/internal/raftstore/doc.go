// Package raftstore is what a node keeps of Raft on disk: the stores opened
// with their options (Open), the log's bbolt file read page by page before
// Raft opens it (CheckLog), the snapshots checked before Raft starts from
// one (CheckSnapshots), snapshots synced to disk as they are written
// (PacedSnapshotStore), the log store's appends watched for failure
// (AppendWatch), and a stopped node's stored membership rewritten when its
// cluster lost its quorum for good (Recover).
package raftstore
