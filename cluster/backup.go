package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/cluster/internal/identity"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// A backup file is the state of the limits at one applied index, checked
// whole before it is used:
//
//	"LNBACKUP"  8 bytes
//	version     uint32, 2
//	index       uint64, the applied index the state was taken at
//	digest      32 bytes, fsm.LimitsDigest of the state
//	cluster     64 bytes, the ID of the cluster it was taken from, NUL-padded
//	state       the FSM's snapshot form
//	length      uint64, the state's length
//	checksum    32 bytes, SHA-256 of everything before it
//
// Integers are big-endian. Version 1 files have no cluster field; both are
// read. The state holds the limits alone: neither the members' HTTP
// addresses nor the cluster's ID, so a restored cluster keeps its own ID
// (its members' data directories record it, and they would refuse each
// other if the state said another) and records its members' addresses
// again.

const (
	backupMagic   = "LNBACKUP"
	backupVersion = 2
	// backupHeaderBytes and backupTrailerBytes frame the state; a version 1
	// header is backupClusterBytes shorter.
	backupClusterBytes = 64
	backupHeaderBytes  = 8 + 4 + 8 + 32 + backupClusterBytes
	backupTrailerBytes = 8 + 32
)

// headerBytesOf is the header's length in a file of version v.
func headerBytesOf(v uint32) int64 {
	if v == 1 {
		return backupHeaderBytes - backupClusterBytes
	}
	return backupHeaderBytes
}

// MaxBackupBytes bounds a backup file a node will restore.
const MaxBackupBytes = fsm.MaxRestoreBytes

// backup is the state frozen for a backup file (contract.Backup).
type backup struct {
	info  contract.BackupInfo
	state *fsm.BackupState
}

// Backup freezes this node's state at one applied index, copy-on-write:
// applies go on while the file is written. It first catches up with what
// the leader had applied when Backup was called, so a backup taken after a
// decision holds it, whichever node serves it.
func (n *Node) Backup(ctx context.Context) (contract.Backup, error) {
	if err := n.catchUp(ctx); err != nil {
		return nil, err
	}
	index, state := n.fsm.Backup()
	return &backup{info: contract.BackupInfo{Index: index, LimitsDigest: state.LimitsDigest(), ClusterID: n.ClusterID()}, state: state}, nil
}

func (b *backup) Info() contract.BackupInfo { return b.info }

// Write writes the backup file.
func (b *backup) Write(w io.Writer) error {
	sum := sha256.New()
	out := io.MultiWriter(w, sum)
	var header [backupHeaderBytes]byte
	copy(header[:8], backupMagic)
	binary.BigEndian.PutUint32(header[8:12], backupVersion)
	binary.BigEndian.PutUint64(header[12:20], b.info.Index)
	copy(header[20:52], b.info.LimitsDigest[:])
	copy(header[52:], b.info.ClusterID)
	if _, err := out.Write(header[:]); err != nil {
		return fmt.Errorf("cluster: backup: %w", err)
	}
	counter := &countingWriter{w: out}
	if err := b.state.Write(counter); err != nil {
		return fmt.Errorf("cluster: backup: %w", err)
	}
	var length [8]byte
	binary.BigEndian.PutUint64(length[:], uint64(counter.n))
	if _, err := out.Write(length[:]); err != nil {
		return fmt.Errorf("cluster: backup: %w", err)
	}
	if _, err := w.Write(sum.Sum(nil)); err != nil {
		return fmt.Errorf("cluster: backup: %w", err)
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
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
	if !n.isLeader() {
		return contract.BackupInfo{}, 0, &contract.NotLeaderError{LeaderHTTPAddr: leaderHTTPAddr(n.raft, n.fsm)}
	}
	backup, restoredIndex, err = n.restorer.restore(ctx, r)
	if err != nil {
		return contract.BackupInfo{}, 0, err
	}
	n.recordAudit(ctx, contract.AuditRestore, fmt.Sprintf("backup at index %d", backup.Index), fmt.Sprintf("limits digest %x, restored at index %d", backup.LimitsDigest[:8], restoredIndex))
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
	frame, err := checkBackup(io.LimitReader(r, MaxBackupBytes+1), spool)
	if err != nil {
		return contract.BackupInfo{}, 0, err
	}
	state := func() *io.SectionReader { return io.NewSectionReader(spool, frame.offset, frame.bytes) }
	begin, err := rs.begin(frame.bytes, state)
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
	rs.logger.Info("restored a backup", "backup_index", frame.info.Index, "restored_at", restoredIndex, "bytes", frame.bytes, "took", time.Since(started),
		"backup_cluster_id", frame.info.ClusterID, "cluster_id", rs.clusterID())
	return frame.info, restoredIndex, nil
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

// backupFrame is where a checked backup file holds its state.
type backupFrame struct {
	info          contract.BackupInfo
	offset, bytes int64
}

// checkBackup copies a backup file from r to spool and checks its framing
// and checksum, returning what its header says and where its state is.
func checkBackup(r io.Reader, spool io.Writer) (backupFrame, error) {
	bad := func(format string, args ...any) (backupFrame, error) {
		return backupFrame{}, contract.Invalid("", "not a limitnode backup, or a damaged one: "+format, args...)
	}
	sum := sha256.New()
	tail := &tailKeeper{keep: backupTrailerBytes}
	n, err := io.Copy(io.MultiWriter(spool, tail), r)
	if err != nil {
		return backupFrame{}, fmt.Errorf("cluster: restore: read the backup: %w", err)
	}
	if n > MaxBackupBytes {
		return bad("larger than %d bytes", int64(MaxBackupBytes))
	}
	if n < 12 {
		return bad("%d bytes is too short", n)
	}
	head := tail.head
	if !bytes.Equal(head[:8], []byte(backupMagic)) {
		return bad("it does not start with %q", backupMagic)
	}
	version := binary.BigEndian.Uint32(head[8:12])
	if version != 1 && version != backupVersion {
		return bad("version %d; this node reads versions 1 and %d", version, backupVersion)
	}
	headerBytes := headerBytesOf(version)
	if n < headerBytes+backupTrailerBytes {
		return bad("%d bytes is too short", n)
	}
	// Read as unsigned: a damaged length is a large number, not a negative
	// one.
	length, holds := binary.BigEndian.Uint64(tail.last[:8]), uint64(n-headerBytes-backupTrailerBytes)
	if length != holds {
		return bad("it says its state is %d bytes but holds %d (truncated?)", length, holds)
	}
	if _, err := tail.hashAllButLast(sum, spool); err != nil {
		return backupFrame{}, fmt.Errorf("cluster: restore: %w", err)
	}
	if !bytes.Equal(sum.Sum(nil), tail.last[8:]) {
		return bad("its checksum does not match its content")
	}
	info := contract.BackupInfo{Index: binary.BigEndian.Uint64(head[12:20])}
	copy(info.LimitsDigest[:], head[20:52])
	if version >= 2 {
		info.ClusterID = string(bytes.TrimRight(head[52:52+backupClusterBytes], "\x00"))
	}
	return backupFrame{info: info, offset: headerBytes, bytes: int64(length)}, nil
}

// tailKeeper remembers the first backupHeaderBytes and the last keep bytes
// written through it.
type tailKeeper struct {
	keep  int
	head  []byte
	last  []byte
	total int64
}

func (t *tailKeeper) Write(p []byte) (int, error) {
	if need := backupHeaderBytes - len(t.head); need > 0 {
		t.head = append(t.head, p[:min(need, len(p))]...)
	}
	t.last = append(t.last, p...)
	if len(t.last) > t.keep {
		t.last = t.last[len(t.last)-t.keep:]
	}
	t.total += int64(len(p))
	return len(p), nil
}

// hashAllButLast feeds everything but the trailer's checksum (the last 32
// bytes) from the spool file to h.
func (t *tailKeeper) hashAllButLast(h hash.Hash, spool io.Writer) (int64, error) {
	f, ok := spool.(*os.File)
	if !ok {
		return 0, errors.New("the spool is not a file")
	}
	return io.Copy(h, io.NewSectionReader(f, 0, t.total-32))
}
