package fsm

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/msgpack"
)

// v1FixtureState is a state with a record of every section of a snapshot:
// buckets of every algorithm, request IDs, members, policies, leases,
// waiters' groups, blocks, RLS domains and their versions, penalty counts,
// open and settled reservations, share holders and an audit trail.
// testdata/snapshot-v1 is this state as the version-1 format wrote it.
func v1FixtureState(t testing.TB) *applier {
	a := newApplier(t)
	for _, e := range randomLog(t, 7, 300) {
		a.raw(e)
	}
	now := a.fsm.Now() + int64(time.Second)
	a.putRLS(edgeConfig)
	a.put(contract.Policy{Name: "login", Limit: hourly(1), Penalty: threeInAMinute})
	for range 2 {
		a.allow(now, Request{Checks: []Check{policyCheck("mallory", "login", nil, 1)}})
	}
	a.command(CommandSetClusterID, &ClusterIDCommand{ID: "fixture-1"})
	a.allow(now, reserve(Request{RequestID: "llm-1", Checks: []Check{inlineCheck("tenant", perMinute100, 50)}}, time.Minute))
	second := a.allow(now, reserve(Request{RequestID: "llm-2", Checks: []Check{inlineCheck("tenant", perMinute100, 10)}}, time.Minute))[0]
	a.settle(now, second.SettlementID, "", 4)
	a.allow(now, askFor(one("hot", hundredBurst, 1), 10, time.Second))
	held := acquire("report-1", now)
	held.Max = 1
	a.lease(CommandAcquireLease, held)
	waiting := waitFor("report-2", now)
	waiting.Max = 1
	a.lease(CommandAcquireLease, waiting)
	return a
}

// TestAVersion1SnapshotStillRestores restores testdata/snapshot-v1, a
// snapshot the version-1 format wrote of v1FixtureState, and finds the
// same state: the digests recorded beside it, which a state built now
// also has (digests hash version 1's layout, whatever a release writes).
// Snapshots written now are version 2 and restore to the same digests.
func TestAVersion1SnapshotStillRestores(t *testing.T) {
	t.Parallel()
	stored, err := os.ReadFile("testdata/snapshot-v1")
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := os.ReadFile("testdata/snapshot-v1.digests")
	if err != nil {
		t.Fatal(err)
	}
	digestsOf := func(f *FSM) string {
		_, sum := f.Digest()
		_, limits := f.LimitsDigest()
		return hex.EncodeToString(sum[:]) + "\n" + hex.EncodeToString(limits[:]) + "\n"
	}
	built := v1FixtureState(t).fsm
	if got := digestsOf(built); got != string(recorded) {
		t.Fatalf("the fixture's state digests to\n%s, the recorded digests are\n%s(a change to the state's records needs the fixture written again)", got, recorded)
	}
	fromV1 := newApplier(t).fsm
	if err := fromV1.Restore(io.NopCloser(bytes.NewReader(stored))); err != nil {
		t.Fatalf("a version-1 snapshot: %v", err)
	}
	if got := digestsOf(fromV1); got != string(recorded) {
		t.Fatalf("restored from version 1: digests\n%s, want\n%s", got, recorded)
	}
	snap, err := built.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memorySink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if h := headerOf(t, sink.Bytes()); h.Version != snapshotVersion || h.Buckets != 0 {
		t.Fatalf("a snapshot written now has header %+v, want version %d without counts", h, snapshotVersion)
	}
	fromV2 := newApplier(t).fsm
	if err := fromV2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatalf("a version-2 snapshot: %v", err)
	}
	if got := digestsOf(fromV2); got != string(recorded) {
		t.Fatalf("restored from version 2: digests\n%s, want\n%s", got, recorded)
	}
}

// TestTaggedSectionsAreReadInOrderOrRefused writes version-2 streams by
// hand: a section a later release may add, one out of order, one that
// claims more records than a state holds, and a version no release wrote
// are each refused, naming what is wrong, and change nothing.
func TestTaggedSectionsAreReadInOrderOrRefused(t *testing.T) {
	t.Parallel()
	header := snapshotHeader{Version: snapshotVersion, NowNanos: t0}
	tests := []struct {
		name   string
		header snapshotHeader
		tags   []sectionTag
		want   string // in the error; "" for a stream that restores
	}{
		{"no sections: an empty state", header, nil, ""},
		{"empty sections", header, []sectionTag{{"bucket", 0}, {"policy", 0}, {"audit entry", 0}}, ""},
		{"a kind this release does not know", header, []sectionTag{{"bucket", 0}, {"quota", 0}}, `"quota" records, which this release does not know`},
		{"out of order", header, []sectionTag{{"policy", 0}, {"bucket", 0}}, `"bucket" records out of order`},
		{"repeated", header, []sectionTag{{"policy", 0}, {"policy", 0}}, `"policy" records out of order`},
		{"more request IDs than a state holds", header, []sectionTag{{"request ID", MaxDedupEntries + 1}}, "request ID records, out of range"},
		{"a negative count", header, []sectionTag{{"node", -1}}, "-1 node records, out of range"},
		{"a version no release wrote", snapshotHeader{Version: 3, NowNanos: t0}, nil, "version 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stream bytes.Buffer
			enc := codec.NewEncoder(&stream, msgpack.Handle)
			if err := enc.Encode(&tt.header); err != nil {
				t.Fatal(err)
			}
			for i := range tt.tags {
				if err := enc.Encode(&tt.tags[i]); err != nil {
					t.Fatal(err)
				}
			}
			target := newApplier(t)
			target.allow(t0, one("k", perMinute100, 1))
			before := mustSnapshot(t, target.fsm)
			err := target.fsm.Restore(io.NopCloser(&stream))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !errors.Is(err, ErrCorruptSnapshot) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Restore = %v, want an ErrCorruptSnapshot naming %q", err, tt.want)
			case tt.want != "" && !bytes.Equal(before, mustSnapshot(t, target.fsm)):
				t.Fatal("a refused snapshot changed the state")
			}
		})
	}
}

// headerOf decodes a snapshot's header.
func headerOf(t *testing.T, stored []byte) snapshotHeader {
	t.Helper()
	var h snapshotHeader
	if err := codec.NewDecoderBytes(stored, msgpack.Handle).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}
