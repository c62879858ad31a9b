// Package raftstore is what a node keeps of Raft on disk, watched and
// checked: the log's bbolt file read page by page before Raft opens it
// (CheckLog), the snapshots checked before Raft starts from one
// (CheckSnapshots), snapshots synced to disk as they are written
// (PacedSnapshotStore), and the log store's appends watched for failure
// (AppendWatch).
package raftstore
