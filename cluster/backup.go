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
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/fsm"
)

// A backup file is the state of the limits at one applied index, checked
// whole before it is used:
//
//	"LNBACKUP"  8 bytes
//	version     uint32, 1
//	index       uint64, the applied index the state was taken at
//	digest      32 bytes, fsm.LimitsDigest of the state
//	state       the FSM's snapshot form
//	length      uint64, the state's length
//	checksum    32 bytes, SHA-256 of everything before it
//
// Integers are big-endian. The members' HTTP addresses travel with it but a
// restored cluster records its own again.

const (
	backupMagic   = "LNBACKUP"
	backupVersion = 1
	// backupHeaderBytes and backupTrailerBytes frame the state.
	backupHeaderBytes  = 8 + 4 + 8 + 32
	backupTrailerBytes = 8 + 32
)

// MaxBackupBytes bounds a backup file a node will restore.
const MaxBackupBytes = 4 << 30

// catchUpTimeout bounds how long a read waits to catch up with the leader.
const catchUpTimeout = 2 * time.Second

// restoreTimeout bounds how long Raft may take to take in a restore.
const restoreTimeout = 5 * time.Minute

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
	return &backup{info: contract.BackupInfo{Index: index, LimitsDigest: state.LimitsDigest()}, state: state}, nil
}

// catchUp waits until this node has applied everything the leader had
// applied when it was called: on the leader, a Raft barrier; on a follower,
// the leader's applied index, asked over the Raft port.
func (n *Node) catchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(n.requestTimeout, catchUpTimeout))
	defer cancel()
	target, err := onLeader(ctx, n, true, func(ctx context.Context) (uint64, error) {
		if n.isLeader() {
			if err := n.raft.Barrier(n.requestTimeout).Error(); err != nil {
				return 0, translate(err)
			}
			return n.raft.AppliedIndex(), nil
		}
		resp, err := n.forwardToLeader(ctx, &forwardRequest{Op: opPing})
		if err != nil {
			return 0, err
		}
		return resp.AppliedIndex, nil
	})
	if err != nil {
		return err
	}
	for n.raft.AppliedIndex() < target || !n.fsmCaughtUp(target) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: this node did not catch up with the leader in time", contract.ErrNoLeader)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// fsmCaughtUp reports whether the FSM has applied every entry up to index
// that Raft hands it (commands and configurations; it never sees barriers
// and no-ops). Raft's AppliedIndex counts an entry once it is handed over,
// before the FSM has applied it, so a read that waited for AppliedIndex
// alone could still see the state before the entry.
func (n *Node) fsmCaughtUp(index uint64) bool {
	snapshot, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	for i := max(n.fsm.LastIndex(), snapshot) + 1; i <= index; i++ {
		var l raft.Log
		if err := n.logStore.GetLog(i, &l); err != nil {
			return false
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return false
		}
	}
	return true
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
	copy(header[20:], b.info.LimitsDigest[:])
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
// the state goes through Raft (hashicorp/raft's user restore), so every
// node switches to it at one log index, which Restore returns with the
// backup's digest. It runs on the leader; elsewhere it returns a
// *contract.NotLeaderError.
func (n *Node) Restore(ctx context.Context, r io.Reader) (backup contract.BackupInfo, restoredIndex uint64, err error) {
	if !n.isLeader() {
		return contract.BackupInfo{}, 0, &contract.NotLeaderError{LeaderHTTPAddr: n.leaderHTTPAddr()}
	}
	spool, err := os.CreateTemp(n.cfg.DataDir, "restore-*.tmp")
	if err != nil {
		return contract.BackupInfo{}, 0, fmt.Errorf("cluster: restore: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	info, stateBytes, err := checkBackup(io.LimitReader(r, MaxBackupBytes+1), spool)
	if err != nil {
		return contract.BackupInfo{}, 0, err
	}
	state := func() io.Reader { return io.NewSectionReader(spool, backupHeaderBytes, stateBytes) }
	if err := fsm.New(n.logger).Restore(io.NopCloser(bufio.NewReader(state()))); err != nil {
		return contract.BackupInfo{}, 0, contract.Invalid("", "the backup's state does not restore: %v", err)
	}
	// The cluster keeps its own audit trail: the backup's state goes in
	// with it.
	withTrail, size, err := fsm.WithAuditTrail(io.NewSectionReader(spool, backupHeaderBytes, stateBytes), stateBytes, n.fsm.AuditTrail())
	if err != nil {
		return contract.BackupInfo{}, 0, contract.Invalid("", "the backup's state does not restore: %v", err)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: size}
	if err := n.raft.Restore(meta, withTrail, max(n.requestTimeout, restoreTimeout)); err != nil {
		return contract.BackupInfo{}, 0, translate(err)
	}
	restoredIndex = n.raft.AppliedIndex()
	n.waitOutLeases() // a restore gives capacity back as a raise does
	n.recordAudit(ctx, contract.AuditRestore, fmt.Sprintf("backup at index %d", info.Index), fmt.Sprintf("limits digest %x, restored at index %d", info.LimitsDigest[:8], restoredIndex))
	n.logger.Info("restored a backup", "backup_index", info.Index, "restored_at", restoredIndex)
	return info, restoredIndex, ctx.Err()
}

// checkBackup copies a backup file from r to spool and checks its framing
// and checksum, returning what its header says and the state's length.
func checkBackup(r io.Reader, spool io.Writer) (contract.BackupInfo, int64, error) {
	bad := func(format string, args ...any) (contract.BackupInfo, int64, error) {
		return contract.BackupInfo{}, 0, contract.Invalid("", "not a limitnode backup, or a damaged one: "+format, args...)
	}
	sum := sha256.New()
	tail := &tailKeeper{keep: backupTrailerBytes}
	n, err := io.Copy(io.MultiWriter(spool, tail), r)
	if err != nil {
		return contract.BackupInfo{}, 0, fmt.Errorf("cluster: restore: read the backup: %w", err)
	}
	if n > MaxBackupBytes {
		return bad("larger than %d bytes", int64(MaxBackupBytes))
	}
	if n < backupHeaderBytes+backupTrailerBytes {
		return bad("%d bytes is too short", n)
	}
	head := tail.head
	if !bytes.Equal(head[:8], []byte(backupMagic)) {
		return bad("it does not start with %q", backupMagic)
	}
	if v := binary.BigEndian.Uint32(head[8:12]); v != backupVersion {
		return bad("version %d; this node reads version %d", v, backupVersion)
	}
	length := int64(binary.BigEndian.Uint64(tail.last[:8]))
	if length != n-backupHeaderBytes-backupTrailerBytes {
		return bad("it says its state is %d bytes but holds %d (truncated?)", length, n-backupHeaderBytes-backupTrailerBytes)
	}
	if _, err := tail.hashAllButLast(sum, spool); err != nil {
		return contract.BackupInfo{}, 0, fmt.Errorf("cluster: restore: %w", err)
	}
	if !bytes.Equal(sum.Sum(nil), tail.last[8:]) {
		return bad("its checksum does not match its content")
	}
	info := contract.BackupInfo{Index: binary.BigEndian.Uint64(head[12:20])}
	copy(info.LimitsDigest[:], head[20:52])
	return info, length, nil
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
