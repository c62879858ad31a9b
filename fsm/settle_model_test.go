package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"pgregory.net/rapid"
)

// modelReservation is a reservation as the sequential model of
// TestSettlementsAgainstASequentialModel sees it.
type modelReservation struct {
	id            string
	at, end       int64
	reserved      int64
	settled       bool
	cost          int64
	refunded      int64
	charged, owed int64 // owed: charged plus forgiven, the excess asked for
	settledAt     int64
}

// unit is units admitted at an instant, as a single caller would see them.
type unit struct{ at, units int64 }

// TestSettlementsAgainstASequentialModel drives the state machine, through
// its log entries, with random reservations, plain admissions, settlements
// with less, as much or more, retries of a settlement, settlements with
// another cost, late ones, and time passing, on a policy with max_debt (a
// token bucket) or a fixed window; a sequential model keeps what each
// answer said. It checks: a retry answers the first settlement and changes
// nothing; a second settlement with another cost, an unknown one and a late
// one are refused and change nothing; a refund never exceeds what was not
// used, nor a charge the excess; and over every interval the key admitted no
// more than the limit allows for the final costs (each reservation's cost
// less its refund at its own time, each charge at its settlement's), plus
// the debt bound, counting a reservation never settled in full.
func TestSettlementsAgainstASequentialModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		a := newApplier(t)
		sec := int64(time.Second)
		limit := algorithms.Limit{Rate: rapid.Int64Range(5, 40).Draw(rt, "rate"), Period: time.Duration(sec)}
		var debt int64
		if rapid.Bool().Draw(rt, "bucket") {
			limit.Burst = rapid.Int64Range(1, 2*limit.Rate).Draw(rt, "burst")
			debt = rapid.Int64Range(0, limit.Burst).Draw(rt, "debt")
		} else {
			limit.Algorithm = algorithms.FixedWindow
		}
		if err := a.put(contract.Policy{Name: "p", Limit: limit, MaxDebt: debt}); err != nil {
			rt.Fatalf("the policy: %v", err)
		}
		now := t0
		var res []*modelReservation
		var plain []unit
		remaining := func() int64 {
			return a.fsm.decide(now, &Request{Checks: []Check{policyCheck("k", "p", nil, 0)}}, &AllowCommand{}).Checks[0].Decision.Remaining
		}
		unchanged := func(what string, do func()) {
			before := remaining()
			do()
			if after := remaining(); after != before {
				rt.Fatalf("%s changed what the key has left: %d, then %d", what, before, after)
			}
		}
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			now += rapid.Int64Range(0, sec/2).Draw(rt, "gap")
			switch rapid.IntRange(0, 5).Draw(rt, "action") {
			case 0, 1: // a reservation, or a plain admission
				cost := rapid.Int64Range(1, limit.Capacity()).Draw(rt, "cost")
				req := policyReq("k", "p", cost)
				reserving := rapid.Bool().Draw(rt, "reserve")
				var ttl time.Duration
				if reserving {
					ttl = time.Duration(rapid.Int64Range(1, 3).Draw(rt, "ttl")) * time.Second
					req = reserve(req, ttl)
				}
				r := a.allow(now, req)[0]
				if r.Rejection != nil {
					rt.Fatalf("refused: %v", r.Rejection)
				}
				switch {
				case !r.Allowed:
				case reserving:
					res = append(res, &modelReservation{id: r.SettlementID, at: now, end: now + int64(ttl), reserved: cost})
				default:
					plain = append(plain, unit{now, cost})
				}
			case 2, 3: // a settlement of one, maybe again
				if len(res) == 0 {
					continue
				}
				m := res[rapid.IntRange(0, len(res)-1).Draw(rt, "which")]
				cost := rapid.Int64Range(0, 2*m.reserved).Draw(rt, "used")
				got := a.settle(now, m.id, "", cost)
				switch {
				case m.settled && cost == m.cost:
					s, ok := got.(*SettleResult)
					if !ok || !s.Settlement.Duplicate || s.Settlement.Refunded != m.refunded || s.Settlement.Charged != m.charged {
						rt.Fatalf("a retry of %s: %#v, want the first answer", m.id, got)
					}
				case m.settled:
					if e, ok := got.(*contract.Error); !ok || e.Code != contract.CodeConflict {
						rt.Fatalf("a second settlement of %s with another cost: %#v", m.id, got)
					}
				case now >= m.end:
					if e, ok := got.(*contract.Error); !ok || e.Code != contract.CodeNotFound {
						rt.Fatalf("a late settlement of %s: %#v", m.id, got)
					}
				default:
					s, ok := got.(*SettleResult)
					if !ok {
						rt.Fatalf("settling %s: %#v", m.id, got)
					}
					st := s.Settlement
					if st.Refunded < 0 || st.Refunded > max(m.reserved-cost, 0) || st.Charged < 0 || st.Charged+st.Forgiven != max(cost-m.reserved, 0) {
						rt.Fatalf("settling %s (%d reserved) with %d: %+v", m.id, m.reserved, cost, st)
					}
					m.settled, m.cost, m.refunded, m.charged, m.owed, m.settledAt = true, cost, st.Refunded, st.Charged, cost-m.reserved, now
				}
			case 4: // a retry of a settled one, which must change nothing
				for _, m := range res {
					if m.settled && now < m.settledAt+int64(contract.SettledMemory) {
						unchanged("a retried settlement", func() { a.settle(now, m.id, "", m.cost) })
						break
					}
				}
			case 5: // an unknown one
				unchanged("an unknown settlement", func() {
					if e, ok := a.settle(now, "s0.0", "", 1).(*contract.Error); !ok || e.Code != contract.CodeNotFound {
						rt.Fatalf("an unknown settlement: %#v", e)
					}
				})
			}
		}
		units := append([]unit(nil), plain...)
		for _, m := range res {
			units = append(units, unit{m.at, m.reserved - m.refunded}) // never settled: in full
			if m.charged > 0 {
				units = append(units, unit{m.settledAt, m.charged})
			}
		}
		if err := admittedWithin(limit, debt, units); err != nil {
			rt.Fatalf("%v, debt %d: %v", limit, debt, err)
		}
	})
}

// admittedWithin checks units against what limit allows over every
// interval, the debt beyond a bucket's burst aside.
func admittedWithin(l algorithms.Limit, debt int64, units []unit) error {
	sumIn := func(from, to int64) (n int64) {
		for _, u := range units {
			if u.at >= from && u.at <= to {
				n += u.units
			}
		}
		return n
	}
	p := int64(l.Period)
	for _, x := range units {
		if l.Algorithm == algorithms.FixedWindow {
			start := x.at - x.at%p
			if n := sumIn(start, start+p-1); n > l.Rate {
				return fmt.Errorf("%d units in the window from %d", n, start)
			}
			continue
		}
		for _, y := range units {
			if y.at >= x.at {
				if n := sumIn(x.at, y.at); n*p > (l.Burst+debt)*p+(y.at-x.at)*l.Rate {
					return fmt.Errorf("%d units in [%d, %d], more than burst + debt + rate × %d ns", n, x.at, y.at, y.at-x.at)
				}
			}
		}
	}
	return nil
}
