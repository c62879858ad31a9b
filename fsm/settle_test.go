package fsm

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

func (a *applier) settle(now int64, id, scope string, cost int64) any {
	a.t.Helper()
	data, err := Encode(CommandSettle, &SettleCommand{NowNanos: now, ID: id, Scope: scope, Cost: cost})
	if err != nil {
		a.t.Fatal(err)
	}
	return a.raw(data)
}

func reserve(r Request, ttl time.Duration) Request {
	r.Settle = &SettleAsk{TTLNanos: int64(ttl)}
	return r
}

func TestReserveThenSettle(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	var raises int
	a.fsm.OnRaise(func(string) { raises++ })
	a.put(contract.Policy{Name: "tokens", Limit: algorithms.Limit{Rate: 1000, Period: time.Hour, Burst: 1000}, MaxDebt: 100})
	leftOf := func(key string, now int64) int64 {
		res := a.fsm.decide(now, &Request{Checks: []Check{policyCheck(key, "tokens", nil, 0)}}, &AllowCommand{})
		return res.Checks[0].Decision.Remaining
	}
	left := func(now int64) int64 { return leftOf("tenant", now) }
	r := a.allow(t0, reserve(policyReq("tenant", "tokens", 500), time.Minute))[0]
	if !r.Allowed || r.SettlementID == "" || left(t0) != 500 {
		t.Fatalf("the reservation: %+v, %d left", r, left(t0))
	}
	id := r.SettlementID
	steps := []struct {
		name    string
		id      string
		scope   string
		cost    int64
		wantErr contract.Code
		check   func(s contract.Settlement)
	}{
		{"another scope's", id, "mallory", 100, contract.CodeNotFound, nil},
		{"an unknown one", "s1.9", "", 100, contract.CodeNotFound, nil},
		{"a negative cost", id, "", -1, contract.CodeInvalidArgument, nil},
		{"with less", id, "", 120, "", func(s contract.Settlement) {
			if s.Upfront != 500 || s.Refunded != 380 || s.Charged != 0 || left(t0+1) != 880 || raises != 2 { // the policy put, the refund
				t.Fatalf("settled with 120 of 500: %+v, %d left, %d raises", s, left(t0+1), raises)
			}
		}},
		{"again, as a retry", id, "", 120, "", func(s contract.Settlement) {
			if !s.Duplicate || s.Refunded != 380 || left(t0+1) != 880 {
				t.Fatalf("the retry: %+v, %d left", s, left(t0+1))
			}
		}},
		{"again, with another cost", id, "", 130, contract.CodeConflict, nil},
	}
	for _, st := range steps {
		got := a.settle(t0+1, st.id, st.scope, st.cost)
		if st.wantErr != "" {
			if e, ok := got.(*contract.Error); !ok || e.Code != st.wantErr {
				t.Fatalf("%s: %#v, want %s", st.name, got, st.wantErr)
			}
			continue
		}
		res, ok := got.(*SettleResult)
		if !ok {
			t.Fatalf("%s: %#v", st.name, got)
		}
		st.check(res.Settlement)
	}

	// More than reserved: the excess is charged, in debt up to max_debt.
	r = a.allow(t0+2, reserve(policyReq("tenant", "tokens", 800), time.Minute))[0]
	s := a.settle(t0+3, r.SettlementID, "", 1100).(*SettleResult).Settlement
	if s.Charged != 180 || s.Forgiven != 120 || s.RetryAfter <= 0 {
		t.Fatalf("settled with 1100 of 800 and 80 left: %+v, want 80 + 100 of debt charged, 120 forgiven", s)
	}
	if d := a.allow(t0+4, policyReq("tenant", "tokens", 1))[0]; d.Allowed {
		t.Fatal("a key in debt admitted a request")
	}

	// Never settled: charged in full, and then it is too late, whether the
	// sweep ended it first or the settlement finds it ended.
	r = a.allow(t0+5, reserve(policyReq("late", "tokens", 300), time.Minute))[0]
	late := a.allow(t0+5, reserve(policyReq("late", "tokens", 300), 2*time.Minute))[0]
	a.allow(t0+5+int64(time.Minute), policyReq("other", "tokens", 1)) // the sweep ends the first
	at := t0 + 5 + int64(2*time.Minute)
	before := leftOf("late", at)
	for _, res := range []Result{r, late} {
		if e, ok := a.settle(at, res.SettlementID, "", 1).(*contract.Error); !ok || e.Code != contract.CodeNotFound || e.Field != "settlement_id" {
			t.Fatalf("a late settlement: %#v", e)
		}
	}
	if after := leftOf("late", at); after != before || after != 1000-600+33 { // 2 minutes refilled 33
		t.Fatalf("the late key has %d left, %d before the late settlements: the ended reservations were not charged in full, or a late settlement changed them", after, before)
	}
}

// TestAPolicyChangeForfeitsRefunds: a refund gives back only into the state
// the reservation was charged in; after a change of its policy the state may
// have been converted, so nothing is given back, and the excess of a
// settlement is still charged under the limit the key has now.
func TestAPolicyChangeForfeitsRefunds(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	hourly := algorithms.Limit{Rate: 1000, Period: time.Hour, Burst: 1000}
	a.put(contract.Policy{Name: "tokens", Limit: hourly, MaxDebt: 10})
	less := a.allow(t0, reserve(policyReq("k", "tokens", 500), time.Minute))[0]
	more := a.allow(t0, reserve(policyReq("k", "tokens", 100), time.Minute))[0]
	a.put(contract.Policy{Name: "tokens", Limit: hourly, MaxDebt: 20})
	if s := a.settle(t0+1, less.SettlementID, "", 0).(*SettleResult).Settlement; s.Refunded != 0 {
		t.Fatalf("a refund after a policy change: %+v", s)
	}
	if s := a.settle(t0+1, more.SettlementID, "", 150).(*SettleResult).Settlement; s.Charged != 50 {
		t.Fatalf("a charge after a policy change: %+v", s)
	}
	gone := a.allow(t0+2, reserve(policyReq("k", "tokens", 10), time.Minute))[0]
	data, _ := Encode(CommandDeletePolicy, &NamedDeleteCommand{Name: "tokens"})
	a.raw(data)
	if s := a.settle(t0+3, gone.SettlementID, "", 100).(*SettleResult).Settlement; s.Charged != 0 || s.Forgiven != 90 {
		t.Fatalf("a settlement under a deleted policy: %+v", s)
	}
}

func TestSettlementsSurviveSnapshots(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 100, Period: time.Hour}
	r1 := a.allow(t0, reserve(one("k", l, 60), time.Minute))[0]
	r2 := a.allow(t0, reserve(one("k", l, 30), time.Minute))[0]
	a.settle(t0+1, r2.SettlementID, "", 10)
	snap, _ := a.fsm.Snapshot()
	stored, _ := persisted(t, snap)
	b := newApplier(t)
	b.index = a.index
	if err := b.fsm.Restore(io.NopCloser(bytes.NewReader(stored))); err != nil {
		t.Fatal(err)
	}
	if s := b.settle(t0+2, r1.SettlementID, "", 20).(*SettleResult).Settlement; s.Refunded != 40 {
		t.Fatalf("after a restore: %+v", s)
	}
	if s := b.settle(t0+2, r2.SettlementID, "", 10).(*SettleResult).Settlement; !s.Duplicate {
		t.Fatalf("the settled one after a restore: %+v", s)
	}
	a.settle(t0+2, r1.SettlementID, "", 20)
	if !bytes.Equal(mustSnapshot(t, a.fsm), mustSnapshot(t, b.fsm)) {
		t.Fatal("the restored state settled differently")
	}
}

func TestAResetKeyForfeitsItsRefunds(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 100, Period: time.Hour}
	r := a.allow(t0, reserve(one("k", l, 60), time.Minute))[0]
	data, _ := Encode(CommandResetKey, &NamedDeleteCommand{Name: "k"})
	a.raw(data)
	a.allow(t0+1, one("k", l, 90)) // another caller's, after the reset
	if s := a.settle(t0+2, r.SettlementID, "", 0).(*SettleResult).Settlement; s.Refunded != 0 {
		t.Fatalf("a refund after a reset: %+v: it would give back another caller's units", s)
	}
}

func TestSettleRejections(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	window := algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 100, Period: time.Hour}
	tests := []struct {
		name  string
		req   Request
		field string
	}{
		{"a TTL under a second", reserve(one("k", perMinute100, 1), time.Millisecond), "settle.ttl"},
		{"checks of different costs", reserve(Request{Checks: []Check{inlineCheck("a", perMinute100, 1), inlineCheck("b", perMinute100, 2)}}, time.Minute), "settle"},
		{"with max_wait", func() Request {
			r := reserve(one("k", perMinute100, 1), time.Minute)
			r.MaxWait = int64(time.Second)
			return r
		}(), "settle"},
	}
	for _, tt := range tests {
		if r := a.allow(t0, tt.req)[0]; r.Rejection == nil || r.Rejection.Field != tt.field {
			t.Errorf("%s: %+v, want a refusal of %s", tt.name, r, tt.field)
		}
	}
	if err, ok := a.put(contract.Policy{Name: "w", Limit: window, MaxDebt: 1}).(*contract.Error); !ok || err.Field != "max_debt" {
		t.Fatalf("max_debt on a window: %v", err)
	}
}

// TestOneCallerCannotFillTheReservations: a token at its bound of open
// reservations is refused another (resource_exhausted), while another
// token still reserves; one settled frees a place.
func TestOneCallerCannotFillTheReservations(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.put(contract.Policy{Name: "tokens", Limit: algorithms.Limit{Rate: 1_000_000, Period: time.Hour, Burst: 1_000_000}})
	scoped := func(scope string) Request {
		r := reserve(policyReq("shared", "tokens", 1), time.Hour)
		r.Scope = scope
		return r
	}
	var first string
	for opened := 0; opened < contract.MaxSettlementsPerCaller; opened += 1000 {
		reqs := make([]Request, min(1000, contract.MaxSettlementsPerCaller-opened))
		for i := range reqs {
			reqs[i] = scoped("mallory")
		}
		for _, r := range a.allow(t0, reqs...) {
			if !r.Allowed || r.SettlementID == "" {
				t.Fatalf("mallory's reservation %d: %+v", opened, r)
			}
			if first == "" {
				first = r.SettlementID
			}
		}
	}
	r := a.allow(t0, scoped("mallory"))[0]
	if r.Rejection == nil || r.Rejection.Code != contract.CodeResourceExhausted || r.Allowed {
		t.Fatalf("mallory's reservation past her bound: %+v, want it refused", r)
	}
	if r := a.allow(t0, scoped("alice"))[0]; !r.Allowed || r.SettlementID == "" {
		t.Fatalf("alice's reservation while mallory is at her bound: %+v", r)
	}
	if _, ok := a.settle(t0+1, first, "mallory", 1).(*SettleResult); !ok {
		t.Fatal("mallory could not settle her first reservation")
	}
	if r := a.allow(t0+1, scoped("mallory"))[0]; !r.Allowed {
		t.Fatalf("mallory's reservation once one was settled: %+v", r)
	}
}
