// Package backupfile reads and writes a backup file: the state of the
// limits at one applied index, framed with its header and checked whole
// (its length and checksum) before anything uses it.
//
// The format:
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
package backupfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

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

// MaxBytes bounds a backup file a node will restore.
const MaxBytes = fsm.MaxRestoreBytes

// backup is the state frozen for a backup file (contract.Backup).
type backup struct {
	info  contract.BackupInfo
	state *fsm.BackupState
}

// New returns the backup of state, which info describes.
func New(info contract.BackupInfo, state *fsm.BackupState) contract.Backup {
	return &backup{info: info, state: state}
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

// Frame is where a checked backup file holds its state.
type Frame struct {
	Info          contract.BackupInfo
	Offset, Bytes int64
}

// Check copies a backup file from r to spool, reading no more than MaxBytes
// and one, and checks its framing and checksum, returning what its header
// says and where in spool its state is. A file that is not a backup, or a
// damaged one, is a *contract.Error.
func Check(r io.Reader, spool *os.File) (Frame, error) {
	r = io.LimitReader(r, MaxBytes+1)
	bad := func(format string, args ...any) (Frame, error) {
		return Frame{}, contract.Invalid("", "not a limitnode backup, or a damaged one: "+format, args...)
	}
	sum := sha256.New()
	tail := &tailKeeper{keep: backupTrailerBytes}
	n, err := io.Copy(io.MultiWriter(spool, tail), r)
	if err != nil {
		return Frame{}, fmt.Errorf("cluster: restore: read the backup: %w", err)
	}
	if n > MaxBytes {
		return bad("larger than %d bytes", int64(MaxBytes))
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
		return Frame{}, fmt.Errorf("cluster: restore: %w", err)
	}
	if !bytes.Equal(sum.Sum(nil), tail.last[8:]) {
		return bad("its checksum does not match its content")
	}
	info := contract.BackupInfo{Index: binary.BigEndian.Uint64(head[12:20])}
	copy(info.LimitsDigest[:], head[20:52])
	if version >= 2 {
		info.ClusterID = string(bytes.TrimRight(head[52:52+backupClusterBytes], "\x00"))
	}
	return Frame{Info: info, Offset: headerBytes, Bytes: int64(length)}, nil
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
func (t *tailKeeper) hashAllButLast(h hash.Hash, spool *os.File) (int64, error) {
	return io.Copy(h, io.NewSectionReader(spool, 0, t.total-32))
}
