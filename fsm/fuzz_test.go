package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/rls"
)

// seedEntries returns valid log entries of every command type, the starting
// points of the fuzzers (also kept in testdata/fuzz).
func seedEntries(t testing.TB) [][]byte {
	var out [][]byte
	add := func(ct CommandType, body any) {
		data, err := Encode(ct, body)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	add(CommandAllow, &AllowCommand{NowNanos: t0, Requests: []Request{
		one("k", perMinute100, 1),
		{RequestID: "r1", Checks: []Check{inlineCheck("a", algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Rate: 3, Period: time.Second}, 2)}},
		{Checks: []Check{policyCheck("", "p", []contract.Dimension{{Name: "user", Value: "u"}}, 1)}},
	}})
	add(CommandSetNode, &NodeCommand{ID: "n1", HTTPAddr: "127.0.0.1:7001"})
	add(CommandRemoveNode, &NodeCommand{ID: "n1"})
	add(CommandPutPolicy, &contract.Policy{Name: "p", Limit: perMinute100, Overrides: []contract.Override{{Key: "vip", Limit: perMinute100}}, Shadow: true, KeyTemplate: "{user}"})
	add(CommandDeletePolicy, &NamedDeleteCommand{Name: "p"})
	add(CommandAcquireLease, &LeaseCommand{NowNanos: t0, ID: "l1", Key: "job", Max: 2, TTLNanos: int64(time.Second)})
	add(CommandReleaseLease, &LeaseCommand{NowNanos: t0, ID: "l1"})
	edge, err := rls.Parse([]byte(edgeConfig))
	if err != nil {
		t.Fatal(err)
	}
	add(CommandPutRLSConfig, &edge)
	add(CommandAllow, &AllowCommand{NowNanos: t0, Requests: []Request{
		query(descriptor(1, "client", "a"), descriptor(2, "route", "/login"), descriptor(0, "bucket", "b")),
	}})
	add(CommandDeleteRLSConfig, &NamedDeleteCommand{Name: "edge"})
	add(CommandResetKey, &NamedDeleteCommand{Name: "k"})
	add(CommandPutPolicy, &contract.Policy{Name: "tokens", Limit: hourly(1000), MaxDebt: 10, Penalty: &contract.Penalty{Denials: 2, Within: time.Minute, BlockFor: time.Minute}})
	add(CommandAllow, &AllowCommand{NowNanos: t0 + 1, Requests: []Request{reserve(policyReq("t", "tokens", 600), time.Minute), reserve(one("k", perMinute100, 5), time.Minute)}})
	add(CommandSettle, &SettleCommand{NowNanos: t0 + 2, ID: settlementID(uint64(len(out)), 0), Cost: 700})
	add(CommandPutBlock, &BlockCommand{NowNanos: t0 + 3, Key: "blocked", Reason: "fuzz", TTLNanos: int64(time.Minute)})
	return out
}

// FuzzApplyEntry: whatever bytes reach the log, applying them never panics,
// and an entry refused as corrupt changes nothing.
func FuzzApplyEntry(f *testing.F) {
	for _, e := range seedEntries(f) {
		f.Add(e)
	}
	f.Fuzz(func(t *testing.T, entry []byte) {
		a := newApplier(t)
		for _, e := range seedEntries(t)[:1] {
			a.raw(e)
		}
		before := mustSnapshot(t, a.fsm)
		resp := a.raw(entry)
		if err, ok := resp.(error); ok && !errors.As(err, new(*contract.Error)) {
			if !errors.Is(err, ErrCorruptCommand) {
				t.Fatalf("apply returned %v, not ErrCorruptCommand", err)
			}
			if !bytes.Equal(before, mustSnapshot(t, a.fsm)) {
				t.Fatal("a corrupt entry changed the state")
			}
		}
		// Whatever happened, the state still snapshots and restores.
		snap := mustSnapshot(t, a.fsm)
		if err := New(a.fsm.logger).Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
			t.Fatalf("the state after the entry does not restore: %v", err)
		}
	})
}

// FuzzRestore: whatever bytes a snapshot holds, Restore never panics; it
// either refuses them and keeps the state, or takes a state that snapshots
// and restores again identically.
func FuzzRestore(f *testing.F) {
	a := newApplier(f)
	for _, e := range seedEntries(f) {
		a.raw(e)
	}
	a.put(contract.Policy{Name: "q", Limit: perMinute100})
	f.Add(mustSnapshot(f, a.fsm))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		target := newApplier(t)
		target.raw(seedEntries(t)[0])
		before := mustSnapshot(t, target.fsm)
		if err := target.fsm.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("Restore = %v, not ErrCorruptSnapshot", err)
			}
			if !bytes.Equal(before, mustSnapshot(t, target.fsm)) {
				t.Fatal("a refused snapshot changed the state")
			}
			return
		}
		again := mustSnapshot(t, target.fsm)
		other := newApplier(t)
		if err := other.fsm.Restore(io.NopCloser(bytes.NewReader(again))); err != nil {
			t.Fatalf("a restored state does not restore again: %v", err)
		}
		if !bytes.Equal(again, mustSnapshot(t, other.fsm)) {
			t.Fatal("restoring changed the state")
		}
		// And it decides without panicking, at a time a leader would stamp.
		last := other.fsm.Now()
		other.allow(ClampStamp(max(t0, last)+int64(time.Hour), last), one("k", perMinute100, 1))
	})
}
