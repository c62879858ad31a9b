package fsm

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

func (a *applier) block(ct CommandType, cmd BlockCommand) any {
	a.t.Helper()
	data, err := Encode(ct, &cmd)
	if err != nil {
		a.t.Fatal(err)
	}
	return a.raw(data)
}

func TestABlockDeniesWithoutTouchingCounters(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.put(contract.Policy{Name: "per-user", Limit: hourly(10), KeyTemplate: "{user}"})
	a.allow(t0, one("u1", perMinute100, 10))
	put := a.block(CommandPutBlock, BlockCommand{NowNanos: t0 + 1, Key: "u1", Reason: "abuse", TTLNanos: int64(time.Minute)})
	if r, ok := put.(*BlockResult); !ok || r.Block.UntilNanos != t0+1+int64(time.Minute) || r.Shortened {
		t.Fatalf("put answered %#v", put)
	}
	before := mustSnapshot(t, a.fsm)

	tests := []struct {
		name  string
		req   Request
		check int
	}{
		{"an inline check on the key", one("u1", perMinute100, 1), 0},
		{"the key under another limit", one("u1", hourly(5), 1), 0},
		{"a policy's template making the key", policyReq("", "per-user", 1, contract.Dimension{Name: "user", Value: "u1"}), 0},
		{"the second check of two", Request{Checks: []Check{inlineCheck("other", perMinute100, 1), inlineCheck("u1", perMinute100, 1)}}, 1},
	}
	for _, tt := range tests {
		res := a.fsm.decide(t0+2, &tt.req, &AllowCommand{})
		if res.Allowed || res.Blocked == nil || res.Blocked.Check != tt.check || res.Blocked.Reason != "abuse" {
			t.Fatalf("%s: %+v, want denied by the block of check %d", tt.name, res, tt.check)
		}
		d := res.Checks[tt.check].Decision
		if want := int64(time.Minute) - 1; int64(d.RetryAfter) != want || res.DenyForNanos != want {
			t.Errorf("%s: retry after %d, deny for %d, want %d (the block's end)", tt.name, d.RetryAfter, res.DenyForNanos, want)
		}
	}
	if !bytes.Equal(before, mustSnapshot(t, a.fsm)) {
		t.Fatal("a blocked request changed the state")
	}
	if r := a.allow(t0+3, one("other", perMinute100, 1)); !r[0].Allowed {
		t.Fatal("a key that is not blocked was denied")
	}
	// Through the log as well, and then past its end.
	if r := a.allow(t0+4, one("u1", perMinute100, 1)); r[0].Allowed || r[0].Blocked == nil {
		t.Fatalf("the blocked key was answered %+v", r[0])
	}
	if r := a.allow(t0+1+int64(time.Minute), one("u1", perMinute100, 1)); !r[0].Allowed {
		t.Fatalf("the key was still denied when its block ended: %+v", r[0])
	}
	if page, _ := a.fsm.Blocks("", 10, 0); len(page) != 0 {
		t.Fatalf("the block outlived its end: %+v", page)
	}
}

func TestBlockCommands(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	minute := int64(time.Minute)
	steps := []struct {
		name          string
		ct            CommandType
		cmd           BlockCommand
		wantErr       contract.Code
		wantShortened bool
	}{
		{"a block", CommandPutBlock, BlockCommand{NowNanos: t0, Key: "k", Reason: "r", TTLNanos: 10 * minute}, "", false},
		{"a longer one", CommandPutBlock, BlockCommand{NowNanos: t0, Key: "k", TTLNanos: 20 * minute}, "", false},
		{"a shorter one gives capacity back", CommandPutBlock, BlockCommand{NowNanos: t0, Key: "k", TTLNanos: minute}, "", true},
		{"a ttl under a second", CommandPutBlock, BlockCommand{NowNanos: t0, Key: "k", TTLNanos: 1}, contract.CodeInvalidArgument, false},
		{"a reason on two lines", CommandPutBlock, BlockCommand{NowNanos: t0, Key: "k", Reason: "a\nb", TTLNanos: minute}, contract.CodeInvalidArgument, false},
		{"an empty key", CommandPutBlock, BlockCommand{NowNanos: t0, TTLNanos: minute}, contract.CodeInvalidArgument, false},
		{"lifting it", CommandDeleteBlock, BlockCommand{NowNanos: t0, Key: "k"}, "", false},
		{"lifting it again", CommandDeleteBlock, BlockCommand{NowNanos: t0, Key: "k"}, contract.CodeNotFound, false},
		{"a block that ends", CommandPutBlock, BlockCommand{NowNanos: t0, Key: "j", TTLNanos: minute}, "", false},
		{"lifting it once it ended", CommandDeleteBlock, BlockCommand{NowNanos: t0 + minute, Key: "j"}, contract.CodeNotFound, false},
	}
	for _, st := range steps {
		got := a.block(st.ct, st.cmd)
		if st.wantErr != "" {
			if e, ok := got.(*contract.Error); !ok || e.Code != st.wantErr {
				t.Fatalf("%s: answered %#v, want %s", st.name, got, st.wantErr)
			}
			continue
		}
		r, ok := got.(*BlockResult)
		if !ok {
			t.Fatalf("%s: answered %#v", st.name, got)
		}
		if r.Shortened != st.wantShortened || EffectOf(st.ct, got).Raised != (st.wantShortened || st.ct == CommandDeleteBlock) {
			t.Errorf("%s: shortened %v, raised %v", st.name, r.Shortened, EffectOf(st.ct, got).Raised)
		}
	}
}

func TestBlocksSurviveSnapshotsAndPage(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	for _, k := range []string{"c", "a", "b", "d"} {
		a.block(CommandPutBlock, BlockCommand{NowNanos: t0, Key: k, Reason: "why " + k, TTLNanos: int64(time.Hour)})
	}
	snap, _ := a.fsm.Snapshot()
	stored, restored := persisted(t, snap)
	if !bytes.Equal(restored, mustSnapshot(t, a.fsm)) {
		t.Fatal("the restored state differs")
	}
	fresh := New(nil)
	if err := fresh.Restore(io.NopCloser(bytes.NewReader(stored))); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for after := ""; ; {
		page, next := fresh.Blocks(after, 3, 0)
		for _, b := range page {
			keys = append(keys, b.Key)
		}
		if next == "" {
			break
		}
		after = next
	}
	if got := len(keys); got != 4 || keys[0] != "a" || keys[3] != "d" {
		t.Fatalf("paged %v, want a b c d", keys)
	}
	if n, _ := fresh.BlockCount(t0); n != 4 {
		t.Fatalf("%d blocked, want 4", n)
	}
	res := fresh.decide(t0+1, &Request{Checks: []Check{inlineCheck("b", perMinute100, 1)}}, &AllowCommand{})
	if res.Allowed || res.Blocked == nil || res.Blocked.Reason != "why b" {
		t.Fatalf("after a restore: %+v", res)
	}
}

func TestDenyNowAnswersABlock(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.allow(t0, one("k", perMinute100, 1))
	a.block(CommandPutBlock, BlockCommand{NowNanos: t0, Key: "k", TTLNanos: int64(time.Second)})
	req := one("k", perMinute100, 1)
	res, ok := a.fsm.DenyNow(&req, t0+int64(100*time.Millisecond), func() bool { return false })
	if !ok || res.Blocked == nil || res.DenyForNanos != int64(900*time.Millisecond) {
		t.Fatalf("DenyNow: %v %+v", ok, res)
	}
	if _, ok := a.fsm.DenyNow(&req, t0+int64(time.Second), func() bool { return false }); ok {
		t.Fatal("DenyNow denied once the block ended at the leader's clock")
	}
}

// TestABlockDeniesAnRLSCounter: for the Envoy rate limit service the key is
// the counter key of a descriptor a limit applies to.
func TestABlockDeniesAnRLSCounter(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.putRLS(edgeConfig)
	blocked := descriptor(1, "client", "c1")
	key := rls.CounterKey("edge", blocked.Entries, nil)
	a.block(CommandPutBlock, BlockCommand{NowNanos: t0, Key: key, Reason: "scraper", TTLNanos: int64(time.Hour)})
	r := a.allow(t0+1, query(descriptor(1, "client", "c2")), query(descriptor(1, "route", "/x"), blocked))
	if !r[0].Allowed {
		t.Fatalf("another client was denied: %+v", r[0])
	}
	if r[1].Allowed || r[1].Blocked == nil || r[1].Blocked.Reason != "scraper" || outcomeOf(r[1], 1) != "over" || outcomeOf(r[1], 0) != "ok" {
		t.Fatalf("the blocked client's query: %+v", r[1])
	}
	if r[1].RLS[1].Check != r[1].Blocked.Check {
		t.Fatalf("the block names check %d, the descriptor counts on %d", r[1].Blocked.Check, r[1].RLS[1].Check)
	}
}
