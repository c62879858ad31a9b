package fsm

import (
	"bytes"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

var threeInAMinute = &contract.Penalty{Denials: 3, Within: time.Minute, BlockFor: 10 * time.Minute}

func TestAPenaltyBlocksAKeyDeniedOften(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.put(contract.Policy{Name: "login", Limit: hourly(1), Penalty: threeInAMinute})
	req := policyReq("alice", "login", 1)
	if r := a.allow(t0, req)[0]; !r.Allowed {
		t.Fatalf("the first: %+v", r)
	}
	sec := int64(time.Second)
	for i := range 3 {
		now := t0 + int64(i+1)*sec
		if _, fast := a.fsm.DenyNow(&req, now, func() bool { return false }); fast {
			t.Fatalf("denial %d answered on the fast path: it would not be counted", i+1)
		}
		r := a.allow(now, req)[0]
		if r.Allowed || r.Blocked != nil || r.DenyForNanos != 0 || r.DeniedBy.Cause != contract.CauseLimit {
			t.Fatalf("denial %d: %+v, want a limit's denial that no lease repeats", i+1, r)
		}
		if want := map[bool]string{true: "login", false: ""}[i == 2]; r.Penalized != want {
			t.Fatalf("denial %d penalized %q, want %q", i+1, r.Penalized, want)
		}
	}
	blockedAt := t0 + 3*sec
	r := a.allow(t0+4*sec, req)[0]
	if r.Blocked == nil || r.Blocked.Penalty != "login" || r.DeniedBy.Cause != contract.CausePenalty || r.Blocked.Reason != "3 denials within 1m0s" {
		t.Fatalf("after the penalty: %+v", r)
	}
	if want := blockedAt + int64(10*time.Minute) - (t0 + 4*sec); r.DenyForNanos != want || int64(r.Checks[0].Decision.RetryAfter) != want {
		t.Fatalf("deny for %d, retry after %d; want the block's %d left", r.DenyForNanos, r.Checks[0].Decision.RetryAfter, want)
	}
	if _, fast := a.fsm.DenyNow(&req, t0+5*sec, func() bool { return false }); !fast {
		t.Fatal("a blocked key's denial was not answered on the fast path")
	}
	if n, byPenalty := a.fsm.BlockCount(t0 + 5*sec); n != 1 || byPenalty != 1 {
		t.Fatalf("%d blocked, %d by a penalty", n, byPenalty)
	}
	// It lifts at its end, by cluster time; the hour's limit still holds.
	end := blockedAt + int64(10*time.Minute)
	if r := a.allow(end-1, req)[0]; r.Blocked == nil {
		t.Fatalf("a nanosecond before its end: %+v", r)
	}
	if r := a.allow(end, req)[0]; r.Blocked != nil || r.DeniedBy.Cause != contract.CauseLimit {
		t.Fatalf("at its end: %+v, want the limit's denial", r)
	}
}

func TestPenaltyWindowsOpenWithTheirFirstDenial(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.put(contract.Policy{Name: "login", Limit: hourly(1), Penalty: threeInAMinute})
	a.put(contract.Policy{Name: "plain", Limit: hourly(1)})
	req := policyReq("bob", "login", 1)
	a.allow(t0, req, policyReq("bob", "plain", 1))
	sec := int64(time.Second)
	for _, at := range []int64{1, 50, 62, 100} { // the first window holds 2, the second (from 62 s) 2
		if r := a.allow(t0+at*sec, req, policyReq("bob", "plain", 1)); r[0].Penalized != "" || r[0].Blocked != nil || r[1].DenyForNanos == 0 {
			t.Fatalf("at %d s: %+v (a policy without a penalty is leased as before: %d)", at, r[0], r[1].DenyForNanos)
		}
	}
	// Counts survive a snapshot: the third of the second window blocks.
	snap, _ := a.fsm.Snapshot()
	stored, _ := persisted(t, snap)
	b := newApplier(t)
	b.index = a.index
	if err := b.fsm.Restore(io.NopCloser(bytes.NewReader(stored))); err != nil {
		t.Fatal(err)
	}
	if r := b.allow(t0+110*sec, req)[0]; r.Penalized != "login" {
		t.Fatalf("the third denial of the window after a restore: %+v", r)
	}
}

func TestPenaltyRejections(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	tests := []struct {
		name  string
		p     contract.Policy
		field string
	}{
		{"no denials", contract.Policy{Name: "p", Limit: hourly(1), Penalty: &contract.Penalty{Within: time.Minute, BlockFor: time.Minute}}, "penalty.denials"},
		{"a window of a day and more", contract.Policy{Name: "p", Limit: hourly(1), Penalty: &contract.Penalty{Denials: 1, Within: 25 * time.Hour, BlockFor: time.Minute}}, "penalty.within"},
		{"a block under a second", contract.Policy{Name: "p", Limit: hourly(1), Penalty: &contract.Penalty{Denials: 1, Within: time.Minute, BlockFor: time.Millisecond}}, "penalty.block_for"},
		{"a shadow policy", contract.Policy{Name: "p", Limit: hourly(1), Shadow: true, Penalty: threeInAMinute}, "penalty"},
	}
	for _, tt := range tests {
		if err, ok := a.put(tt.p).(*contract.Error); !ok || err.Field != tt.field {
			t.Errorf("%s: %v, want a refusal of %s", tt.name, a.put(tt.p), tt.field)
		}
	}
}

// TestAPenaltyOnTheRateLimitService: the domain's YAML extension blocks the
// counter key of a descriptor denied often.
func TestAPenaltyOnTheRateLimitService(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	if r := a.putRLS("domain: edge\ndescriptors:\n  - key: client\n    rate_limit: {unit: hour, requests_per_unit: 1, penalty: {denials: 2, within: 1m, block_for: 1h}}\n"); r != nil {
		t.Fatalf("put: %v", r)
	}
	q := query(descriptor(1, "client", "c1"))
	a.allow(t0, q)
	if r := a.allow(t0+1, q)[0]; r.Penalized != "" || r.DenyForNanos != 0 {
		t.Fatalf("the first denial: %+v", r)
	}
	if r := a.allow(t0+2, q)[0]; r.Penalized != "rls/edge" {
		t.Fatalf("the second denial: %+v", r)
	}
	r := a.allow(t0+3, q)[0]
	key := rls.CounterKey("edge", q.RLS.Descriptors[0].Entries, nil)
	if r.Blocked == nil || r.Blocked.Key != key || r.DeniedBy.Cause != contract.CausePenalty {
		t.Fatalf("after the penalty: %+v", r)
	}
}

// TestOneCallerCannotFillThePenaltyCounts: one token that is denied on a
// different key each time opens at most its share of the cluster's
// counts, so another token's abuser is still counted and blocked; a caller
// without a token (every caller, then) has the cluster's bound only.
func TestOneCallerCannotFillThePenaltyCounts(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.put(contract.Policy{Name: "login", Limit: hourly(1), Penalty: &contract.Penalty{Denials: 2, Within: time.Hour, BlockFor: time.Hour}})
	scoped := func(scope, key string) Request {
		r := policyReq(key, "login", 1)
		r.Scope = scope
		return r
	}
	flood := func(scope string, keys int) {
		for first := 0; first < keys; first += 1000 {
			var reqs []Request
			for i := first; i < min(first+1000, keys); i++ {
				key := scope + "-" + strconv.Itoa(i)
				reqs = append(reqs, scoped(scope, key), scoped(scope, key)) // admitted, then denied: a count opens
			}
			a.allow(t0, reqs...)
		}
	}
	flood("mallory", contract.MaxPenaltyCountersPerCaller+10)
	if got := a.fsm.penalties.byOpener["mallory"]; got != contract.MaxPenaltyCountersPerCaller {
		t.Fatalf("mallory opened %d counts, want her bound of %d", got, contract.MaxPenaltyCountersPerCaller)
	}
	a.allow(t0, scoped("alice", "abuser"))
	for i, want := range []string{"", "login"} {
		if r := a.allow(t0, scoped("alice", "abuser"))[0]; r.Penalized != want {
			t.Fatalf("alice's abuser, denial %d: penalized %q, want %q", i+1, r.Penalized, want)
		}
	}
	flood("", contract.MaxPenaltyCountersPerCaller+10)
	if got := a.fsm.penalties.byOpener[""]; got != contract.MaxPenaltyCountersPerCaller+10 {
		t.Fatalf("callers without a token opened %d counts, want all %d (the cluster's bound only)", got, contract.MaxPenaltyCountersPerCaller+10)
	}
	restored := New(nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(mustSnapshot(t, a.fsm)))); err != nil {
		t.Fatal(err)
	}
	if got := restored.penalties.byOpener["mallory"]; got != contract.MaxPenaltyCountersPerCaller {
		t.Fatalf("after a snapshot mallory holds %d counts, want %d", got, contract.MaxPenaltyCountersPerCaller)
	}
}
