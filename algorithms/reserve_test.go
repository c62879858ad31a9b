package algorithms

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestReservationsAgainstTheModel drives random sequences of requests with
// random max waits through Reserve and checks what the issue asks of
// reservations: the wait is exact (the request would be admitted by Decide
// at now+wait on the same state, and not a nanosecond earlier), never more
// than max_wait; a denied request changes nothing; and over any interval
// the admitted cost is at most the burst plus what the rate refills in the
// interval plus what it refills in max_wait.
func TestReservationsAgainstTheModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		alg := rapid.SampledFrom([]Algorithm{TokenBucket, LeakyBucket, GCRA}).Draw(rt, "algorithm")
		l := Limit{Algorithm: alg, Rate: rapid.Int64Range(1, 50).Draw(rt, "rate"),
			Period: time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Second)).Draw(rt, "period"))}
		l.Burst = rapid.Int64Range(1, 20).Draw(rt, "burst")
		if l.Validate() != nil {
			rt.Skip("invalid limit")
		}
		maxWait := rapid.Int64Range(0, 3*int64(l.Period)).Draw(rt, "max_wait")
		type admission struct{ at, cost int64 }
		var admitted []admission
		var s State
		now := int64(1_700_000_000) * int64(time.Second)
		for i := range rapid.IntRange(1, 60).Draw(rt, "requests") {
			now += rapid.Int64Range(0, int64(l.Period)/2).Draw(rt, "gap")
			cost := rapid.Int64Range(0, l.Burst).Draw(rt, "cost")
			d, next := Reserve(l, s, now, cost, time.Duration(maxWait))
			plain, _ := Decide(l, s, now, cost)
			switch {
			case !d.Allowed:
				if !next.Equal(s) || int64(d.RetryAfter) <= maxWait {
					rt.Fatalf("request %d: denied with wait %d ≤ max_wait %d, or changed the state", i, d.RetryAfter, maxWait)
				}
			case int64(d.Wait) > maxWait:
				rt.Fatalf("request %d: a wait of %d over max_wait %d", i, d.Wait, maxWait)
			case d.Wait == 0:
				if !plain.Allowed {
					rt.Fatalf("request %d: admitted without a wait where Decide denies", i)
				}
			default:
				if plain.Allowed || plain.RetryAfter != d.Wait {
					rt.Fatalf("request %d: a wait of %d, Decide says %d", i, d.Wait, plain.RetryAfter)
				}
				if later, _ := Decide(l, s, now+int64(d.Wait), cost); !later.Allowed {
					rt.Fatalf("request %d: not admitted after its wait of %d", i, d.Wait)
				}
				if earlier, _ := Decide(l, s, now+int64(d.Wait)-1, cost); earlier.Allowed {
					rt.Fatalf("request %d: admitted a nanosecond before its wait of %d", i, d.Wait)
				}
				if d.Remaining != 0 {
					rt.Fatalf("request %d: %d remaining while in debt", i, d.Remaining)
				}
			}
			if d.Allowed && cost > 0 {
				admitted = append(admitted, admission{now, cost})
			}
			s = next
		}
		for i := range admitted {
			sum := int64(0)
			for j := i; j < len(admitted); j++ {
				sum += admitted[j].cost
				span := admitted[j].at - admitted[i].at + maxWait
				bound := float64(l.Burst) + float64(l.Rate)*float64(span)/float64(l.Period)
				if float64(sum) > bound+1e-9 {
					rt.Fatalf("%d admitted in %d ns with max_wait %d: over burst %d + refill", sum, admitted[j].at-admitted[i].at, maxWait, l.Burst)
				}
			}
		}
	})
}

func TestWindowsDoNotReserve(t *testing.T) {
	t.Parallel()
	for _, alg := range []Algorithm{FixedWindow, SlidingWindowLog, SlidingWindowCounter} {
		l := Limit{Algorithm: alg, Rate: 1, Period: time.Second}
		_, s := Decide(l, State{}, 1e18, 1)
		if d, next := Reserve(l, s, 1e18, 1, time.Hour); d.Allowed || !next.Equal(s) {
			t.Fatalf("%s: a full window reserved: %+v", alg, d)
		}
	}
}

// TestConvertKeepsReservationDebt: a bucket reserved deep into debt, its
// policy's burst raised by one, still refuses at once: the reservations
// granted under the old limit still run.
func TestConvertKeepsReservationDebt(t *testing.T) {
	t.Parallel()
	from := Limit{Algorithm: TokenBucket, Rate: 10, Period: time.Second, Burst: 10}
	to := Limit{Algorithm: TokenBucket, Rate: 10, Period: time.Second, Burst: 11}
	now := int64(1_700_000_000) * int64(time.Second)
	var s State
	for range 30 { // 10 at once, then 20 reserved over 2 s
		var d Decision
		if d, s = Reserve(from, s, now, 1, 3*time.Second); !d.Allowed {
			t.Fatal("a reservation within max_wait was denied")
		}
	}
	converted := Convert(from, s, to, now+int64(200*time.Millisecond))
	if d, _ := Decide(to, converted, now+int64(200*time.Millisecond), 1); d.Allowed {
		t.Fatal("the converted bucket admits at once although 2 s of reservations are granted")
	}
}
