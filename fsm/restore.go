package fsm

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/limitnode/limitnode/contract"
)

// A backup is restored through the log, as every other change is: the
// leader appends CommandRestoreBegin (the state's length and SHA-256), the
// state in CommandRestoreChunk entries of at most MaxRestoreChunkBytes, and
// CommandRestoreCommit; every replica gathers the chunks (the staged
// restore) and, applying the commit, checks them whole and swaps the
// backup's limits in at that index. A restore therefore takes effect on a
// node exactly when its commit is in that node's log, and a commit is
// applied only once a quorum holds it: whichever node dies when, every node
// ends on one state. (hashicorp/raft's own user restore installs the state
// on the leader before any follower has it; a leader killed then came back
// with the backup's state while the others kept the old one.)
//
// The staged bytes are part of the state until the commit or an abort, and
// are not in snapshots: the state machine refuses to be snapshotted while a
// restore is staged, so a node that restarts, or catches up from a
// snapshot, replays the chunks from the log like any other entry. A leader
// that finds a restore staged that it did not begin (its leader died)
// appends CommandRestoreAbort; a new CommandRestoreBegin also replaces it.

// MaxRestoreBytes bounds a restored state.
const MaxRestoreBytes = 4 << 30

// MaxRestoreChunkBytes bounds the state one CommandRestoreChunk carries.
const MaxRestoreChunkBytes = 1 << 20

// ErrRestoreStaged is FSM.Snapshot's answer while a restore is staged.
var ErrRestoreStaged = errors.New("fsm: a restore is being staged; the state is snapshotted once it is committed or aborted")

// RestoreBeginCommand is the body of CommandRestoreBegin: a restore of a
// state of Bytes bytes whose SHA-256 is Sum begins.
type RestoreBeginCommand struct {
	ID    string
	Bytes int64
	Sum   [sha256.Size]byte
}

// RestoreChunkCommand is the body of CommandRestoreChunk: the state's bytes
// from Offset.
type RestoreChunkCommand struct {
	ID     string
	Offset int64
	Data   []byte
}

// RestoreEndCommand is the body of CommandRestoreCommit and
// CommandRestoreAbort. NowNanos is the leader's time (a commit is stamped).
type RestoreEndCommand struct {
	ID       string
	NowNanos int64
}

// RestoreResult answers a committed restore.
type RestoreResult struct {
	// AtNanos is cluster time after the restore: the backup's.
	AtNanos int64
}

// A restore takes cluster time to the backup's: back, for a backup of the
// past, or forward by as little as a clock ahead of the cluster's would. A
// checksum that is not keyed proves nothing about who wrote a file, so the
// forward step is bounded, and bounded in all: a restore that moves time
// further ahead than earlier ones did raises the state's restore lead, and
// a restore may take time at most MaxRestoreAhead past where it would be
// without the lead,
//
//	backup time ≤ cluster time − lead + MaxRestoreAhead
//	lead after  = max(lead, backup time − (cluster time − lead))
//
// so restoring files 55 s ahead again and again moves time 55 s in all,
// not 55 s each time. The lead never shrinks: the stamps after a restore
// carry it on (a leader estimates cluster time from the entries it
// applied), even after a restore that rewound time, whose rewind the next
// stamp undoes. Once restores have used the whole MaxRestoreAhead, a backup
// may not be ahead of cluster time at all; one that is can be restored
// once cluster time has passed it.

// CheckRestoreTime refuses a backup whose time, backupNanos, a restore
// committed at the leader's stamp stampNanos could not take, as the
// state's own restore lead counts it.
func (f *FSM) CheckRestoreTime(backupNanos, stampNanos int64) *contract.Error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := restoreLead(backupNanos, max(stampNanos, f.nowNanos), f.restoreLeadNanos)
	return err
}

// restoreLead returns the restore lead after restoring a backup of time
// backupNanos at cluster time clusterNanos with the lead leadNanos, or the
// refusal of a backup too far ahead.
func restoreLead(backupNanos, clusterNanos, leadNanos int64) (int64, *contract.Error) {
	if clusterNanos <= 0 {
		return 0, nil // a cluster that never stamped has no time to move
	}
	unled := clusterNanos - leadNanos // where time would be without restores
	if backupNanos > unled+int64(MaxRestoreAhead) {
		earlier := ""
		if leadNanos > 0 {
			earlier = fmt.Sprintf(", which earlier restores already moved %s ahead", time.Duration(leadNanos).Round(time.Second))
		}
		return 0, contract.Invalid("", "the backup's time is %s after the cluster's%s; restores may move time at most %s ahead in all",
			time.Duration(backupNanos-clusterNanos).Round(time.Second), earlier, MaxRestoreAhead)
	}
	return max(leadNanos, backupNanos-unled), nil
}

// stagedRestore is a restore between its begin and its commit.
type stagedRestore struct {
	id   string
	size int64
	sum  [sha256.Size]byte
	data []byte
}

// StagedRestore returns the ID of the restore being staged, or "".
func (f *FSM) StagedRestore() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.staged == nil {
		return ""
	}
	return f.staged.id
}

// validRestoreID checks a restore's ID as a lease's is checked.
func validRestoreID(id string) *contract.Error {
	if err := contract.ValidateLeaseID(id); err != nil {
		return contract.Invalid("id", "a restore's ID is 1 to %d bytes without / or spaces", contract.MaxLeaseIDBytes)
	}
	return nil
}

func (f *FSM) applyRestoreBegin(body []byte) (any, error) {
	var cmd RestoreBeginCommand
	if err := decodeBody(body, &cmd); err != nil {
		return nil, err
	}
	if err := validRestoreID(cmd.ID); err != nil {
		return err, nil
	}
	if cmd.Bytes <= 0 || cmd.Bytes > MaxRestoreBytes {
		return contract.Invalid("", "a restored state is 1 to %d bytes, not %d", MaxRestoreBytes, cmd.Bytes), nil
	}
	if f.staged != nil {
		f.logger.Warn("fsm: a restore replaces one that was staged and not committed", "abandoned", f.staged.id, "id", cmd.ID)
	}
	f.staged = &stagedRestore{id: cmd.ID, size: cmd.Bytes, sum: cmd.Sum}
	return nil, nil
}

func (f *FSM) applyRestoreChunk(body []byte) (any, error) {
	var cmd RestoreChunkCommand
	if err := decodeBody(body, &cmd); err != nil {
		return nil, err
	}
	st := f.staged
	switch {
	case st == nil || st.id != cmd.ID:
		return contract.Conflict("id", "no restore %q is being staged", cmd.ID), nil
	case len(cmd.Data) == 0 || len(cmd.Data) > MaxRestoreChunkBytes:
		return contract.Invalid("data", "a restore's chunk holds 1 to %d bytes", MaxRestoreChunkBytes), nil
	case cmd.Offset != int64(len(st.data)) || cmd.Offset+int64(len(cmd.Data)) > st.size:
		return contract.Invalid("offset", "restore %q holds %d of %d bytes; a chunk of %d at %d does not follow", st.id, len(st.data), st.size, len(cmd.Data), cmd.Offset), nil
	}
	st.data = append(st.data, cmd.Data...)
	return nil, nil
}

func (f *FSM) applyRestoreAbort(body []byte) (any, error) {
	var cmd RestoreEndCommand
	if err := decodeBody(body, &cmd); err != nil {
		return nil, err
	}
	if f.staged != nil && f.staged.id == cmd.ID {
		f.staged = nil
	}
	return nil, nil
}

// applyRestoreCommit checks the staged state whole and swaps its limits in:
// buckets and the shares charged to them, request IDs, policies, leases,
// RLS domains, blocks, penalties, reservations and time. The members'
// addresses, the cluster's ID and the audit trail stay this cluster's. Whatever
// the outcome, the staging is over.
func (f *FSM) applyRestoreCommit(body []byte) (any, error) {
	var cmd RestoreEndCommand
	if err := decodeBody(body, &cmd); err != nil {
		return nil, err
	}
	if err := f.checkTime(cmd.NowNanos); err != nil {
		return nil, err
	}
	st := f.staged
	if st == nil || st.id != cmd.ID {
		return contract.Conflict("id", "no restore %q is being staged", cmd.ID), nil
	}
	f.staged = nil
	if int64(len(st.data)) != st.size {
		return contract.Invalid("", "restore %q holds %d of its %d bytes", st.id, len(st.data), st.size), nil
	}
	if sha256.Sum256(st.data) != st.sum {
		return contract.Invalid("", "restore %q: the staged state does not match its checksum", st.id), nil
	}
	fresh := New(f.logger)
	if err := fresh.readSnapshot(bytes.NewReader(st.data)); err != nil {
		return contract.Invalid("", "the backup's state does not restore: %v", err), nil
	}
	clusterNow := max(cmd.NowNanos, f.nowNanos)
	lead, refused := restoreLead(fresh.nowNanos, clusterNow, f.restoreLeadNanos)
	if refused != nil {
		return refused, nil
	}
	// Time may rewind to the backup's; how far the next entries may move it
	// is measured from the latest time the cluster reached.
	f.reachedNanos = max(f.reachedNanos, clusterNow)
	f.restoreLeadNanos = lead
	f.stepTerm = f.applyingTerm
	f.nowNanos, f.buckets = fresh.nowNanos, fresh.buckets
	f.dedup, f.dedupQueue, f.dedupHead, f.dedupPerScope = fresh.dedup, fresh.dedupQueue, fresh.dedupHead, fresh.dedupPerScope
	f.policies, f.leases, f.rlsDomains = fresh.policies, fresh.leases, fresh.rlsDomains
	f.totalOverrides, f.shares = fresh.totalOverrides, fresh.shares
	f.blocks, f.rlsVersions, f.penalties, f.settles = fresh.blocks, fresh.rlsVersions, fresh.penalties, fresh.settles
	f.publishSharing()
	if f.onRestore != nil {
		f.onRestore()
	}
	return &RestoreResult{AtNanos: f.nowNanos}, nil
}
