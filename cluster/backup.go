package cluster

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/cluster/internal/backupfile"
	"github.com/limitnode/limitnode/cluster/internal/identity"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// MaxBackupBytes bounds a backup file a node will restore.
const MaxBackupBytes = backupfile.MaxBytes

// Backup freezes this node's state at one applied index, copy-on-write:
// applies go on while the file is written. It first catches up with what
// the leader had applied when Backup was called, so a backup taken after a
// decision holds it, whichever node serves it.
func (n *Node) Backup(ctx context.Context) (contract.Backup, error) {
	if err := n.route.catchUp(ctx); err != nil {
		return nil, err
	}
	index, state := n.fsm.Backup()
	return backupfile.New(contract.BackupInfo{Index: index, LimitsDigest: state.LimitsDigest(), ClusterID: n.ClusterID()}, state), nil
}

// Restore replaces the cluster's state with a backup file's, read from r.
// The whole file is checked first (its framing, its checksum, and every
// record, by restoring it into a scratch state machine): a truncated,
// corrupted or foreign file is a *contract.Error and changes nothing. Then
// the state goes through the log (fsm's restore.go: a begin, chunks, a
// commit), so every node switches to it at the commit's index, which
// Restore returns with the backup's digest, and a leader that dies part way
// leaves every node on the state before. It runs on the leader; elsewhere it
// returns a *contract.NotLeaderError.
func (n *Node) Restore(ctx context.Context, r io.Reader) (backup contract.BackupInfo, restoredIndex uint64, err error) {
	if !n.IsLeader() {
		return contract.BackupInfo{}, 0, &contract.NotLeaderError{LeaderHTTPAddr: leaderHTTPAddr(n.raft, n.fsm)}
	}
	backup, restoredIndex, err = n.restorer.restore(ctx, r)
	if err != nil {
		return contract.BackupInfo{}, 0, err
	}
	n.route.recordAudit(ctx, contract.AuditRestore, fmt.Sprintf("backup at index %d", backup.Index), fmt.Sprintf("limits digest %x, restored at index %d", backup.LimitsDigest[:8], restoredIndex))
	return backup, restoredIndex, ctx.Err()
}

// restorer stages and commits restores through the leader's log, one at a
// time.
type restorer struct {
	raft     *raft.Raft
	fsm      *fsm.FSM
	logger   *slog.Logger
	spoolDir string        // where a backup file is spooled while it is checked
	timeout  time.Duration // bounds the enqueueing of one entry
	// await waits for an appended entry's outcome (Node.awaitApplied),
	// apply appends a command and waits for it (Node.applyCommand), stamp
	// is the leader's time for an entry (Node.leaderStamp), and
	// waitOutLeases waits until no share granted before can be spent.
	await         func(raft.ApplyFuture) error
	apply         func(t fsm.CommandType, body any) error
	stamp         func() (int64, error)
	waitOutLeases func()
	clusterID     func() string

	mu sync.Mutex // one restore at a time
	// staging names the restore this leader stages, or is nil.
	staging atomic.Pointer[string]
}

// restore checks the backup file read from r, stages its state in the log
// and commits it, and returns the backup's header and the commit's index.
func (rs *restorer) restore(ctx context.Context, r io.Reader) (contract.BackupInfo, uint64, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	spool, err := os.CreateTemp(rs.spoolDir, "restore-*.tmp")
	if err != nil {
		return contract.BackupInfo{}, 0, fmt.Errorf("cluster: restore: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	frame, err := backupfile.Check(r, spool)
	if err != nil {
		return contract.BackupInfo{}, 0, err
	}
	state := func() *io.SectionReader { return io.NewSectionReader(spool, frame.Offset, frame.Bytes) }
	begin, err := rs.begin(frame.Bytes, state)
	if err != nil {
		return contract.BackupInfo{}, 0, err
	}
	rs.staging.Store(&begin.ID)
	defer rs.staging.Store(nil)
	started := time.Now()
	if err := rs.stage(ctx, begin, state()); err != nil {
		rs.abort(begin.ID)
		return contract.BackupInfo{}, 0, err
	}
	// No share is granted while a restore is staged (fsm.grantShare); the
	// ones granted before must end before the commit replaces the buckets
	// that charge them, or their holders would spend them uncharged.
	rs.waitOutLeases()
	restoredIndex, err := rs.commit(begin.ID)
	if err != nil {
		return contract.BackupInfo{}, 0, err
	}
	rs.logger.Info("restored a backup", "backup_index", frame.Info.Index, "restored_at", restoredIndex, "bytes", frame.Bytes, "took", time.Since(started),
		"backup_cluster_id", frame.Info.ClusterID, "cluster_id", rs.clusterID())
	return frame.Info, restoredIndex, nil
}

// begin checks a spooled backup's state of size bytes (state reads it) by
// restoring it into a scratch state machine, and its time against the
// leader's, and returns the command that begins its restore.
func (rs *restorer) begin(size int64, state func() *io.SectionReader) (fsm.RestoreBeginCommand, error) {
	scratch := fsm.New(rs.logger)
	if err := scratch.Restore(io.NopCloser(bufio.NewReader(state()))); err != nil {
		return fsm.RestoreBeginCommand{}, contract.Invalid("", "the backup's state does not restore: %v", err)
	}
	// The commit checks the backup's time again, at its own; this says so
	// before anything is staged.
	now, err := rs.stamp()
	if err != nil {
		return fsm.RestoreBeginCommand{}, err
	}
	if err := rs.fsm.CheckRestoreTime(scratch.Now(), now); err != nil {
		return fsm.RestoreBeginCommand{}, err
	}
	begin := fsm.RestoreBeginCommand{ID: identity.NewClusterID(), Bytes: size}
	sum := sha256.New()
	if _, err := io.Copy(sum, state()); err != nil {
		return fsm.RestoreBeginCommand{}, fmt.Errorf("cluster: restore: %w", err)
	}
	copy(begin.Sum[:], sum.Sum(nil))
	return begin, nil
}

// restoreChunksInFlight is how many chunks of a restore may be appended and
// not yet applied at once: enough to keep the log busy, few enough that a
// restore holds a few megabytes of the leader's memory.
const restoreChunksInFlight = 4

// stage appends a restore's begin and its state's chunks, each
// applied before the restore goes on past restoreChunksInFlight more.
func (rs *restorer) stage(ctx context.Context, begin fsm.RestoreBeginCommand, state io.Reader) error {
	if err := rs.apply(fsm.CommandRestoreBegin, &begin); err != nil {
		return err
	}
	var inFlight []raft.ApplyFuture
	wait := func() error {
		future := inFlight[0]
		inFlight = inFlight[1:]
		if err := rs.await(future); err != nil {
			return translate(err)
		}
		if rej, ok := future.Response().(*contract.Error); ok {
			return rej
		}
		if err, ok := future.Response().(error); ok {
			return fmt.Errorf("cluster: restore: %w", err)
		}
		return nil
	}
	buf := make([]byte, fsm.MaxRestoreChunkBytes)
	for offset := int64(0); offset < begin.Bytes; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cluster: restore: %w", err)
		}
		size, err := io.ReadFull(state, buf[:min(int64(len(buf)), begin.Bytes-offset)])
		if err != nil {
			return fmt.Errorf("cluster: restore: read the spooled state: %w", err)
		}
		data, err := fsm.Encode(fsm.CommandRestoreChunk, &fsm.RestoreChunkCommand{ID: begin.ID, Offset: offset, Data: buf[:size]})
		if err != nil {
			return err
		}
		inFlight = append(inFlight, rs.raft.Apply(data, rs.timeout))
		offset += int64(size)
		if len(inFlight) >= restoreChunksInFlight {
			if err := wait(); err != nil {
				return err
			}
		}
	}
	for len(inFlight) > 0 {
		if err := wait(); err != nil {
			return err
		}
	}
	return nil
}

// commit appends a staged restore's commit, stamped with the
// leader's time, and returns the index at which it took effect.
func (rs *restorer) commit(id string) (uint64, error) {
	stamp, err := rs.stamp()
	if err != nil {
		return 0, err
	}
	data, err := fsm.Encode(fsm.CommandRestoreCommit, &fsm.RestoreEndCommand{ID: id, NowNanos: stamp})
	if err != nil {
		return 0, err
	}
	future := rs.raft.Apply(data, rs.timeout)
	if err := rs.await(future); err != nil {
		return 0, translate(err)
	}
	switch resp := future.Response().(type) {
	case *fsm.RestoreResult:
		if fsm.EffectOf(fsm.CommandRestoreCommit, resp).Waits() {
			rs.waitOutLeases()
		}
		return future.Index(), nil
	case *contract.Error:
		return 0, resp
	default:
		return 0, fmt.Errorf("cluster: restore: the commit answered %v", resp)
	}
}

// abort drops a restore this leader staged and could not finish;
// if it cannot, the next leader does (restorer.abandoned).
func (rs *restorer) abort(id string) {
	if err := rs.apply(fsm.CommandRestoreAbort, &fsm.RestoreEndCommand{ID: id}); err != nil {
		rs.logger.Debug("aborting a restore", "err", err)
	}
}

// abandoned, on the leader, aborts a restore staged by an earlier leader
// that died before committing it: nobody will send the rest.
func (rs *restorer) abandoned() {
	staged := rs.fsm.StagedRestore()
	if mine := rs.staging.Load(); staged == "" || (mine != nil && *mine == staged) {
		return
	}
	rs.logger.Warn("aborting a restore that an earlier leader began and did not commit; the state stays as it was", "restore", staged)
	rs.abort(staged)
}
