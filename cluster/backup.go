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
	return &backup{info: contract.BackupInfo{Index: index, LimitsDigest: state.LimitsDigest(), ClusterID: n.ClusterID()}, state: state}, nil
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
	frame, err := checkBackup(io.LimitReader(r, MaxBackupBytes+1), spool)
	if err != nil {
		return contract.BackupInfo{}, 0, err
	}
	info, stateBytes := frame.info, frame.bytes
	state := func() io.Reader { return io.NewSectionReader(spool, frame.offset, stateBytes) }
	if err := fsm.New(n.logger).Restore(io.NopCloser(bufio.NewReader(state()))); err != nil {
		return contract.BackupInfo{}, 0, contract.Invalid("", "the backup's state does not restore: %v", err)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: stateBytes}
	if err := n.raft.Restore(meta, state(), max(n.requestTimeout, restoreTimeout)); err != nil {
		return contract.BackupInfo{}, 0, translate(err)
	}
	restoredIndex = n.raft.AppliedIndex()
	n.waitOutLeases() // a restore gives capacity back as a raise does
	n.logger.Info("restored a backup", "backup_index", info.Index, "restored_at", restoredIndex, "backup_cluster_id", info.ClusterID, "cluster_id", n.ClusterID())
	return info, restoredIndex, ctx.Err()
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
