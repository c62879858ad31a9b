package fsm

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/contract"
)

// restoreOf returns a backup's state: src's limits without its members.
func restoreOf(t *testing.T, src *FSM) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, state := src.Backup()
	if err := state.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func (a *applier) command(ct CommandType, body any) any {
	a.t.Helper()
	data, err := Encode(ct, body)
	if err != nil {
		a.t.Fatal(err)
	}
	return a.raw(data)
}

// TestARestoreTakesEffectAtItsCommitOnly: a restore's chunks change nothing
// the state machine decides until the commit, which swaps the backup's
// limits in and keeps the cluster's own ID; while it is staged the state
// machine refuses to be snapshotted; chunks that do not follow, and a
// commit of a restore not wholly staged or of another ID, are refused and
// change nothing.
func TestARestoreTakesEffectAtItsCommitOnly(t *testing.T) {
	src := newApplier(t)
	src.allow(t0, one("from-backup", perMinute100, 100))
	state := restoreOf(t, src.fsm)

	a := newApplier(t)
	a.command(CommandSetClusterID, &ClusterIDCommand{ID: "c-mine"})
	a.allow(t0, one("before", perMinute100, 1))
	before := mustSnapshot(t, a.fsm)
	_, beforeDigest := a.fsm.LimitsDigest()
	half := len(state) / 2
	begin := &RestoreBeginCommand{ID: "r1", Bytes: int64(len(state)), Sum: sha256.Sum256(state)}
	refusals := []struct {
		name string
		ct   CommandType
		body any
	}{
		{"a chunk before the begin", CommandRestoreChunk, &RestoreChunkCommand{ID: "r1", Data: state[:half]}},
		{"a commit before the begin", CommandRestoreCommit, &RestoreEndCommand{ID: "r1", NowNanos: t0}},
	}
	for _, r := range refusals {
		if _, ok := a.command(r.ct, r.body).(*contract.Error); !ok {
			t.Fatalf("%s was not refused", r.name)
		}
	}
	if got := a.command(CommandRestoreBegin, begin); got != nil {
		t.Fatalf("begin: %v", got)
	}
	if _, err := a.fsm.Snapshot(); !errors.Is(err, ErrRestoreStaged) {
		t.Fatalf("a snapshot while a restore is staged: %v", err)
	}
	for _, r := range []struct {
		name string
		ct   CommandType
		body any
	}{
		{"a chunk at the wrong offset", CommandRestoreChunk, &RestoreChunkCommand{ID: "r1", Offset: 1, Data: state[1:half]}},
		{"a chunk of another restore", CommandRestoreChunk, &RestoreChunkCommand{ID: "r2", Data: state[:half]}},
	} {
		if _, ok := a.command(r.ct, r.body).(*contract.Error); !ok {
			t.Fatalf("%s was not refused", r.name)
		}
	}
	if got := a.command(CommandRestoreChunk, &RestoreChunkCommand{ID: "r1", Data: state[:half]}); got != nil {
		t.Fatalf("first chunk: %v", got)
	}
	if _, got := a.fsm.LimitsDigest(); got != beforeDigest {
		t.Fatal("a staged restore changed the state")
	}
	if _, ok := a.command(CommandRestoreCommit, &RestoreEndCommand{ID: "r1", NowNanos: t0}).(*contract.Error); !ok {
		t.Fatal("a commit of a restore staged by half was not refused")
	}
	if !bytes.Equal(mustSnapshot(t, a.fsm), before) {
		t.Fatal("a refused commit changed the state")
	}

	a.command(CommandRestoreBegin, begin)
	a.command(CommandRestoreChunk, &RestoreChunkCommand{ID: "r1", Data: state[:half]})
	a.command(CommandRestoreChunk, &RestoreChunkCommand{ID: "r1", Offset: int64(half), Data: state[half:]})
	if _, ok := a.command(CommandRestoreCommit, &RestoreEndCommand{ID: "r1", NowNanos: t0}).(*RestoreResult); !ok {
		t.Fatal("the commit of a whole restore did not apply")
	}
	if _, want := src.fsm.LimitsDigest(); func() bool { _, got := a.fsm.LimitsDigest(); return got != want }() {
		t.Fatal("the restored state is not the backup's")
	}
	if a.fsm.ClusterID() != "c-mine" {
		t.Fatalf("the restored cluster's ID is %q, want its own", a.fsm.ClusterID())
	}
	if _, err := a.fsm.Snapshot(); err != nil {
		t.Fatalf("a snapshot after the commit: %v", err)
	}
}

// TestRestoresMoveTimeAheadAMinuteInAll walks restores through the rule
// that bounds them: forward steps add up to MaxRestoreAhead at most, a
// rewind leaves the lead as it was (the next stamps carry it on), a backup
// from the past adds nothing, and the lead survives a snapshot, so that a
// node that restarts from one refuses what the others refuse.
func TestRestoresMoveTimeAheadAMinuteInAll(t *testing.T) {
	t.Parallel()
	const s = int64(time.Second)
	steps := []struct {
		name                  string
		backup, cluster, lead int64
		wantLead              int64
		refused               bool
	}{
		{"a backup of the past", t0 - 3600*s, t0, 0, 0, false},
		{"a backup 55 s ahead", t0 + 55*s, t0, 0, 55 * s, false},
		{"a second 55 s ahead of the time the first left", t0 + 110*s, t0 + 55*s, 55 * s, 0, true},
		{"one 5 s ahead of it, a minute in all", t0 + 60*s, t0 + 55*s, 55 * s, 60 * s, false},
		{"a rewind keeps the lead", t0 - 3600*s, t0 + 60*s, 60 * s, 60 * s, false},
		{"at the whole minute, a backup a nanosecond ahead", t0 + 1, t0, 60 * s, 0, true},
		{"at the whole minute, a backup of now", t0, t0, 60 * s, 60 * s, false},
		{"a cluster that never stamped", t0, 0, 0, 0, false},
	}
	for _, st := range steps {
		lead, err := restoreLead(st.backup, st.cluster, st.lead)
		if (err != nil) != st.refused || (err == nil && lead != st.wantLead) {
			t.Errorf("%s: lead %s, %v; want lead %s, refused %v", st.name, time.Duration(lead), err, time.Duration(st.wantLead), st.refused)
		}
	}

	a := newApplier(t)
	a.allow(t0, one("k", perMinute100, 1))
	src := newApplier(t)
	src.allow(t0+50*s, one("k", perMinute100, 1))
	state := restoreOf(t, src.fsm)
	a.command(CommandRestoreBegin, &RestoreBeginCommand{ID: "r1", Bytes: int64(len(state)), Sum: sha256.Sum256(state)})
	a.command(CommandRestoreChunk, &RestoreChunkCommand{ID: "r1", Data: state})
	if got, ok := a.command(CommandRestoreCommit, &RestoreEndCommand{ID: "r1", NowNanos: t0}).(*RestoreResult); !ok || got.AtNanos != t0+50*s {
		t.Fatalf("restoring a backup 50 s ahead: %#v", got)
	}
	if err := a.fsm.CheckRestoreTime(t0+100*s, t0+50*s); err == nil {
		t.Fatal("a second backup 50 s ahead was not refused")
	}
	_, restored := persisted(t, mustSnapshotOf(t, a.fsm))
	fresh := New(nil)
	if err := fresh.Restore(io.NopCloser(bytes.NewReader(restored))); err != nil {
		t.Fatal(err)
	}
	if err := fresh.CheckRestoreTime(t0+100*s, t0+50*s); err == nil {
		t.Fatal("after a snapshot, a second backup 50 s ahead was not refused")
	}
}

func mustSnapshotOf(t *testing.T, f *FSM) raft.FSMSnapshot {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
