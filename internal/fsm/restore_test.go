package fsm

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

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
