package fsm

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// TestEveryDenialSaysWhatDeniedIt: the check, the policy and the index of
// its last change, the limit that applied, and the cause; through the log
// and on the fast path alike.
func TestEveryDenialSaysWhatDeniedIt(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	vip := hourly(3)
	a.put(contract.Policy{Name: "per-user", Limit: hourly(1), Overrides: []contract.Override{{Key: "vip", Limit: vip}}})
	firstVersion := a.index
	a.put(contract.Policy{Name: "per-user", Limit: hourly(1), Overrides: []contract.Override{{Key: "vip", Limit: vip}}})
	version := a.index
	a.putRLS(edgeConfig)
	domainVersion := a.index
	a.allow(t0, policyReq("u1", "per-user", 1), one("inline", perMinute100, 100), query(descriptor(2, "client", "c1")))
	a.block(CommandPutBlock, BlockCommand{NowNanos: t0, Key: "bad", TTLNanos: int64(time.Minute)})

	tests := []struct {
		name string
		req  Request
		want contract.DeniedBy
	}{
		{"a policy's limit", policyReq("u1", "per-user", 1), contract.DeniedBy{Policy: "per-user", PolicyVersion: version, Limit: hourly(1), Cause: contract.CauseLimit}},
		{"an override", policyReq("vip", "per-user", 4), contract.DeniedBy{}}, // cost over its capacity: refused, not denied
		{"an inline limit, second of two checks", Request{Checks: []Check{inlineCheck("other", perMinute100, 1), inlineCheck("inline", perMinute100, 1)}},
			contract.DeniedBy{Check: 1, Limit: perMinute100, Cause: contract.CauseLimit}},
		{"a block", Request{Checks: []Check{inlineCheck("other", perMinute100, 1), policyCheck("bad", "per-user", nil, 1)}},
			contract.DeniedBy{Check: 1, Policy: "per-user", PolicyVersion: version, Limit: hourly(1), Cause: contract.CauseBlock}},
		{"a descriptor's limit", query(descriptor(1, "client", "c1")),
			contract.DeniedBy{Policy: "rls/edge", PolicyVersion: domainVersion, Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 2, Period: time.Minute}, Cause: contract.CauseLimit}},
	}
	for _, tt := range tests {
		got := a.allow(t0+1, tt.req)[0]
		if tt.want == (contract.DeniedBy{}) {
			if got.Rejection == nil || got.DeniedBy != nil {
				t.Errorf("%s: %+v, want a refusal that explains no denial", tt.name, got)
			}
			continue
		}
		if got.Allowed || got.DeniedBy == nil || *got.DeniedBy != tt.want {
			t.Errorf("%s: denied by %+v, want %+v", tt.name, got.DeniedBy, tt.want)
		}
		fast, ok := a.fsm.DenyNow(&tt.req, t0+1, func() bool { return false })
		if !ok || fast.DeniedBy == nil || *fast.DeniedBy != tt.want {
			t.Errorf("%s on the fast path: denied by %+v, want %+v", tt.name, fast.DeniedBy, tt.want)
		}
	}
	if version == firstVersion {
		t.Fatal("putting a policy again did not change its version")
	}
	if p, _ := a.fsm.Policy("per-user"); p.Version != version {
		t.Fatalf("the policy reads version %d, want %d", p.Version, version)
	}
	if r := a.allow(t0+2, one("free", perMinute100, 1))[0]; r.DeniedBy != nil {
		t.Fatalf("an admission explains a denial: %+v", r.DeniedBy)
	}
}

func TestVersionsSurviveSnapshots(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.put(contract.Policy{Name: "p", Limit: hourly(1)})
	a.putRLS(edgeConfig)
	snap, _ := a.fsm.Snapshot()
	stored, _ := persisted(t, snap)
	fresh := New(nil)
	if err := fresh.Restore(io.NopCloser(bytes.NewReader(stored))); err != nil {
		t.Fatal(err)
	}
	if p, _ := fresh.Policy("p"); p.Version != 1 || fresh.rlsVersions["edge"] != 2 {
		t.Fatalf("restored versions %d and %d, want 1 and 2", p.Version, fresh.rlsVersions["edge"])
	}
}
