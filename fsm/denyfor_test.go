package fsm

import (
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// TestDenialsSayHowLongTheyHold: a denial in an entry, and one answered
// from the applied state, carry how long the same request stays denied (the
// longest wait of its denying checks) and the cluster time that counts
// from; a denial that must not be repeated so carries none.
func TestDenialsSayHowLongTheyHold(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	perSecond := algorithms.Limit{Rate: 1, Period: time.Second, Burst: 1}
	perMinute := algorithms.Limit{Rate: 1, Period: time.Minute, Burst: 1}
	t0 := int64(1e18)
	a.allow(t0, Request{Checks: []Check{inlineCheck("a", perSecond, 1), inlineCheck("b", perMinute, 1)}})
	if err := a.put(contract.Policy{Name: "watch", Limit: perSecond, Shadow: true}); err != nil {
		t.Fatal(err)
	}
	a.allow(t0, Request{Checks: []Check{policyCheck("s", "watch", nil, 1)}})

	both := Request{Checks: []Check{inlineCheck("a", perSecond, 1), inlineCheck("b", perMinute, 1)}}
	tests := []struct {
		name string
		req  Request
		want int64
	}{
		{"two checks deny: the longer wait", both, int64(time.Minute)},
		{"waiting by reservation: it may be admitted sooner", Request{Checks: both.Checks, MaxWait: int64(time.Second)}, 0},
		{"a shadow check, whose denials are counted", Request{Checks: []Check{inlineCheck("a", perSecond, 1), policyCheck("s", "watch", nil, 1)}}, 0},
	}
	for _, tt := range tests {
		r := a.allow(t0, tt.req)[0]
		if r.Allowed || r.DenyForNanos != tt.want || (tt.want > 0 && r.DenyAtNanos != t0) {
			t.Errorf("%s, in an entry: allowed=%v deny for %v at %d; want denied for %v at %d", tt.name, r.Allowed, time.Duration(r.DenyForNanos), r.DenyAtNanos, time.Duration(tt.want), t0)
		}
	}
	// From the applied state, at a leader's clock 10 s on: the waits, and
	// the time they count from, are those of the clock.
	clock := t0 + int64(10*time.Second)
	r, ok := a.fsm.DenyNow(&both, clock, func() bool { return false })
	if !ok || r.DenyAtNanos != clock || r.DenyForNanos != int64(50*time.Second) {
		t.Fatalf("from the applied state: ok=%v deny for %v at %d; want 50s at %d", ok, time.Duration(r.DenyForNanos), r.DenyAtNanos, clock)
	}
}

// TestAnEntryThatLetsANodeAnswerIsToldAsItIsApplied: OnLocalAnswers hears,
// on the applying goroutine and with the entry's term, of each allow entry
// whose results let a node answer on its own (a denial that says how long
// it holds, a share granted), and of no other, so that the leader times a
// later raise from it before the entry's callers could take a lease.
func TestAnEntryThatLetsANodeAnswerIsToldAsItIsApplied(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.term = 7
	var told []uint64
	a.fsm.OnLocalAnswers(func(term uint64) { told = append(told, term) })
	hourly2 := algorithms.Limit{Rate: 2, Period: time.Hour, Burst: 2}
	tests := []struct {
		name string
		req  Request
		told bool
	}{
		{"an admission", one("k", hourly2, 1), false},
		{"the last unit", one("k", hourly2, 1), false},
		{"a denial that holds for a while", one("k", hourly2, 1), true},
		{"an admission with a share granted", askFor(one("s", hundredBurst, 1), 10, time.Second), true},
	}
	for _, tt := range tests {
		told = nil
		a.allow(t0, tt.req)
		if got := len(told) == 1 && told[0] == 7; got != tt.told || len(told) > 1 {
			t.Fatalf("%s: told %v, want told once of term 7: %v", tt.name, told, tt.told)
		}
	}
}
