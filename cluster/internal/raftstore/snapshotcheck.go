package raftstore

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/hashicorp/raft"
)

// CheckSnapshots looks, before Raft opens the stores, at what Raft will
// start from: the newest snapshot that reads back whole (its checksum
// matches), then the log after it. Raft skips a damaged snapshot and takes
// the one before, but if the log no longer holds the entries after that
// one (they were compacted into the damaged snapshot), it panics, on every
// start. So a damaged snapshot is logged, and when what is left cannot
// make up the state, the node stops with one error naming it instead.
func CheckSnapshots(snapshots raft.SnapshotStore, logs raft.LogStore, dir string, logger *slog.Logger) error {
	metas, err := snapshots.List()
	if err != nil {
		return fmt.Errorf("cluster: list the snapshots in %s: %w", dir, err)
	}
	var damaged []string
	var usable *raft.SnapshotMeta
	for _, m := range metas {
		_, rc, err := snapshots.Open(m.ID)
		if err != nil {
			damaged = append(damaged, fmt.Sprintf("%s (%v)", m.ID, err))
			continue
		}
		rc.Close()
		usable = m
		break
	}
	if len(damaged) == 0 {
		return nil
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("cluster: read the log: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("cluster: read the log: %w", err)
	}
	from := uint64(1)
	if usable != nil {
		from = usable.Index + 1
	}
	if last >= from && first > from {
		return fmt.Errorf("cluster: the snapshot %s in %s is damaged, and the log no longer holds the entries after the snapshot before it (it starts at %d, the state needs %d on): restore the node from a backup or remove its data directory and join it again",
			strings.Join(damaged, ", "), dir, first, from)
	}
	start := "the log alone"
	if usable != nil {
		start = "snapshot " + usable.ID + " and the log after it"
	}
	logger.Warn("a snapshot is damaged; starting from "+start, "damaged", strings.Join(damaged, ", "))
	return nil
}
