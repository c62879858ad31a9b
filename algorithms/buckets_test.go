package algorithms

import (
	"errors"
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// referenceBucket is the textbook token bucket in exact rational arithmetic:
// tokens = min(burst, tokens + rate × elapsed / period); allow iff tokens ≥ cost.
type referenceBucket struct {
	limit  Limit
	tokens *big.Rat
	last   int64
}

func newReferenceBucket(l Limit, start int64) *referenceBucket {
	return &referenceBucket{limit: l, tokens: big.NewRat(l.Burst, 1), last: start}
}

func (r *referenceBucket) decide(now, cost int64) (allowed bool, remaining int64) {
	if now > r.last {
		refill := new(big.Rat).SetFrac(
			new(big.Int).Mul(big.NewInt(now-r.last), big.NewInt(r.limit.Rate)),
			big.NewInt(int64(r.limit.Period)))
		r.tokens.Add(r.tokens, refill)
		if burst := big.NewRat(r.limit.Burst, 1); r.tokens.Cmp(burst) > 0 {
			r.tokens = burst
		}
		r.last = now
	}
	if r.tokens.Cmp(big.NewRat(cost, 1)) >= 0 {
		r.tokens.Sub(r.tokens, big.NewRat(cost, 1))
		allowed = true
	}
	floor := new(big.Int).Quo(r.tokens.Num(), r.tokens.Denom())
	return allowed, floor.Int64()
}

func drawLimit(t *rapid.T) Limit {
	periods := []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second, 3 * time.Second, time.Minute, time.Hour, MaxPeriod}
	l := Limit{
		Rate:   rapid.Int64Range(1, 1_000).Draw(t, "rate"),
		Period: rapid.SampledFrom(periods).Draw(t, "period"),
	}
	l.Burst = rapid.Int64Range(1, 2*l.Rate).Draw(t, "burst")
	if l.Validate() != nil {
		l.Burst = l.Rate
	}
	return l
}

// TestDecideMatchesReferenceModel: the TAT form decides exactly like the
// rational-arithmetic bucket on random request sequences.
func TestDecideMatchesReferenceModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		l := drawLimit(t)
		now := rapid.Int64Range(0, 2e18).Draw(t, "start")
		ref := newReferenceBucket(l, now)
		var s State
		for i := range rapid.IntRange(1, 60).Draw(t, "requests") {
			now += rapid.Int64Range(0, 2*int64(l.Period)/l.Rate+1).Draw(t, "gap")
			cost := rapid.Int64Range(0, l.Burst).Draw(t, "cost")
			d, next := Decide(l, s, now, cost)
			wantAllowed, wantRemaining := ref.decide(now, cost)
			if d.Allowed != wantAllowed || d.Remaining != wantRemaining {
				t.Fatalf("request %d (now %d, cost %d): got allowed=%v remaining=%d, reference allowed=%v remaining=%d",
					i, now, cost, d.Allowed, d.Remaining, wantAllowed, wantRemaining)
			}
			s = next
		}
	})
}

// TestDecideInvariants: a denied request and a request of cost 0 leave the
// state as it was, and a denied request's RetryAfter is exact: one nanosecond
// earlier it is still denied, at RetryAfter it is allowed.
func TestDecideInvariants(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		l := drawLimit(t)
		now := rapid.Int64Range(0, 2e18).Draw(t, "start")
		var s State
		for range rapid.IntRange(1, 40).Draw(t, "requests") {
			now += rapid.Int64Range(0, int64(l.Period)/l.Rate+1).Draw(t, "gap")
			cost := rapid.Int64Range(0, l.Burst).Draw(t, "cost")
			d, next := Decide(l, s, now, cost)
			if (!d.Allowed || cost == 0) && !next.Equal(s) {
				t.Fatalf("allowed=%v cost=%d changed the state from %+v to %+v", d.Allowed, cost, s, next)
			}
			if d.Remaining < 0 || d.Remaining > l.Burst {
				t.Fatalf("remaining %d outside [0, %d]", d.Remaining, l.Burst)
			}
			if !d.Allowed {
				if d.RetryAfter <= 0 {
					t.Fatalf("denied with retry-after %d", d.RetryAfter)
				}
				if early, _ := Decide(l, s, now+int64(d.RetryAfter)-1, cost); early.Allowed {
					t.Fatalf("allowed 1ns before retry-after %d", d.RetryAfter)
				}
				if onTime, _ := Decide(l, s, now+int64(d.RetryAfter), cost); !onTime.Allowed {
					t.Fatalf("still denied at retry-after %d", d.RetryAfter)
				}
			}
			if d.Remaining < l.Burst && d.RefillAfter <= 0 {
				t.Fatalf("remaining %d < burst but refill-after %d", d.Remaining, d.RefillAfter)
			}
			s = next
		}
	})
}

// TestAdmittedNeverExceedsBound: in every interval [t0, t1] of a run, the
// cost admitted is at most burst + rate × (t1 − t0) / period.
func TestAdmittedNeverExceedsBound(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		l := drawLimit(t)
		now := rapid.Int64Range(0, 2e18).Draw(t, "start")
		var s State
		type admission struct{ at, cost int64 }
		var admitted []admission
		for range rapid.IntRange(1, 50).Draw(t, "requests") {
			now += rapid.Int64Range(0, int64(l.Period)/l.Rate+1).Draw(t, "gap")
			cost := rapid.Int64Range(1, l.Burst).Draw(t, "cost")
			d, next := Decide(l, s, now, cost)
			if d.Allowed {
				admitted = append(admitted, admission{now, cost})
			}
			s = next
		}
		for i := range admitted {
			sum := int64(0)
			for j := i; j < len(admitted); j++ {
				sum += admitted[j].cost
				elapsed := admitted[j].at - admitted[i].at
				// sum ≤ burst + rate·elapsed/period  ⇔  (sum − burst)·period ≤ rate·elapsed
				lhs := new(big.Int).Mul(big.NewInt(sum-l.Burst), big.NewInt(int64(l.Period)))
				rhs := new(big.Int).Mul(big.NewInt(l.Rate), big.NewInt(elapsed))
				if lhs.Cmp(rhs) > 0 {
					t.Fatalf("admitted %d in %dns, bound is %d + %d×%d/%d", sum, elapsed, l.Burst, l.Rate, elapsed, l.Period)
				}
			}
		}
	})
}

func TestDecideExactAtBoundaries(t *testing.T) {
	t.Parallel()
	const start = int64(1_700_000_000_000_000_000)
	tests := []struct {
		name          string
		limit         Limit
		drain         int64 // requests of cost 1 sent at start
		at            time.Duration
		wantAllowed   bool
		wantRemaining int64
	}{
		{"a full bucket admits exactly burst at once", Limit{Rate: 100, Period: time.Minute, Burst: 100}, 99, 0, true, 0},
		{"one more than burst is denied", Limit{Rate: 100, Period: time.Minute, Burst: 100}, 100, 0, false, 0},
		{"a token is back after exactly period/rate", Limit{Rate: 100, Period: time.Minute, Burst: 100}, 100, 600 * time.Millisecond, true, 0},
		{"and not one nanosecond sooner", Limit{Rate: 100, Period: time.Minute, Burst: 100}, 100, 600*time.Millisecond - 1, false, 0},
		{"a third of a second is exact for 3 per second", Limit{Rate: 3, Period: time.Second, Burst: 3}, 3, time.Second, true, 2},
		{"a year-long period at a billion per period does not overflow", Limit{Rate: MaxRate, Period: MaxPeriod, Burst: MaxBurst}, 5, 0, true, MaxBurst - 6},
		{"a billion per millisecond refills one token per picosecond", Limit{Rate: MaxRate, Period: time.Millisecond, Burst: MaxBurst}, 10, 0, true, MaxBurst - 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.limit.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			var s State
			for i := range tt.drain {
				d, next := Decide(tt.limit, s, start, 1)
				if !d.Allowed {
					t.Fatalf("drain request %d denied", i)
				}
				s = next
			}
			d, _ := Decide(tt.limit, s, start+int64(tt.at), 1)
			if d.Allowed != tt.wantAllowed || d.Remaining != tt.wantRemaining {
				t.Fatalf("got allowed=%v remaining=%d, want allowed=%v remaining=%d", d.Allowed, d.Remaining, tt.wantAllowed, tt.wantRemaining)
			}
		})
	}
}

func TestDecideReportsTimes(t *testing.T) {
	t.Parallel()
	l := Limit{Rate: 10, Period: time.Second, Burst: 10}
	now := int64(1e18)
	d, s := Decide(l, State{}, now, 4)
	want := Decision{Allowed: true, Limit: 10, Remaining: 6, ResetAfter: 400e6, RefillAfter: 100e6}
	if d != want {
		t.Fatalf("first decision %+v, want %+v", d, want)
	}
	d, _ = Decide(l, s, now+50e6, 7)
	want = Decision{Allowed: false, Limit: 10, Remaining: 6, ResetAfter: 350e6, RetryAfter: 50e6, RefillAfter: 50e6}
	if d != want {
		t.Fatalf("denied decision %+v, want %+v", d, want)
	}
	if got := l.ExpiresAtNanos(s); got != now+400e6 {
		t.Fatalf("expires at %d, want %d", got, now+400e6)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		limit   Limit
		wantErr error
	}{
		{"a typical limit is valid", Limit{Rate: 100, Period: time.Minute, Burst: 100}, nil},
		{"an unknown algorithm is refused", Limit{Algorithm: 42, Rate: 1, Period: time.Second, Burst: 1}, ErrUnknownAlgorithm},
		{"a window algorithm takes no burst", Limit{Algorithm: FixedWindow, Rate: 1, Period: time.Second, Burst: 1}, ErrBurstWithWindow},
		{"a window algorithm without burst is valid", Limit{Algorithm: SlidingWindowCounter, Rate: MaxRate, Period: MaxPeriod}, nil},
		{"a log over its maximum rate is refused", Limit{Algorithm: SlidingWindowLog, Rate: MaxLogRate + 1, Period: time.Second}, ErrLogRate},
		{"rate 0 is refused", Limit{Rate: 0, Period: time.Second, Burst: 1}, ErrRate},
		{"rate above the maximum is refused", Limit{Rate: MaxRate + 1, Period: time.Second, Burst: 1}, ErrRate},
		{"a period under 1ms is refused", Limit{Rate: 1, Period: time.Microsecond, Burst: 1}, ErrPeriod},
		{"a period over a year is refused", Limit{Rate: 1, Period: MaxPeriod + 1, Burst: 1}, ErrPeriod},
		{"burst 0 is refused", Limit{Rate: 1, Period: time.Second, Burst: 0}, ErrBurst},
		{"a bucket that takes a century to refill is refused", Limit{Rate: 1, Period: MaxPeriod, Burst: 100}, ErrFillTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.limit.Validate()
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Validate = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestParseAlgorithm(t *testing.T) {
	t.Parallel()
	for _, name := range algorithmNames {
		a, err := ParseAlgorithm(name)
		if err != nil || a.String() != name {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", name, a, err)
		}
	}
	if a, err := ParseAlgorithm(""); err != nil || a != TokenBucket {
		t.Errorf("the default algorithm is %v, %v", a, err)
	}
	if _, err := ParseAlgorithm("token-bucket"); err == nil {
		t.Error("a misspelt name was accepted")
	}
}

func BenchmarkDecide(b *testing.B) {
	l := Limit{Rate: 1000, Period: time.Second, Burst: 1000}
	var s State
	now := int64(1e18)
	for b.Loop() {
		now += 500_000
		_, s = Decide(l, s, now, 1)
	}
}
