package algorithms

import (
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var allAlgorithms = []Algorithm{TokenBucket, LeakyBucket, GCRA, FixedWindow, SlidingWindowLog, SlidingWindowCounter}

// drawAnyLimit draws a valid limit of the given algorithm.
func drawAnyLimit(t *rapid.T, a Algorithm) Limit {
	if a.IsBucket() {
		l := drawLimit(t)
		l.Algorithm = a
		return l
	}
	periods := []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second, 3 * time.Second, time.Minute, MaxPeriod}
	return Limit{
		Algorithm: a,
		Rate:      rapid.Int64Range(1, 200).Draw(t, "rate"),
		Period:    rapid.SampledFrom(periods).Draw(t, "period"),
	}
}

// gap draws a time step that, over a run, crosses windows and refills.
func gap(t *rapid.T, l Limit) int64 {
	return rapid.Int64Range(0, 2*int64(l.Period)/l.Rate+1).Draw(t, "gap")
}

// TestEveryAlgorithmKeepsTheInvariants: for every algorithm, a denied request
// and a request of cost 0 change nothing; RetryAfter is exact (denied one
// nanosecond before, allowed at it); remaining stays within the capacity;
// and state is equivalent to no state from ExpiresAtNanos on, which is what
// lets the FSM delete it.
func TestEveryAlgorithmKeepsTheInvariants(t *testing.T) {
	t.Parallel()
	for _, a := range allAlgorithms {
		t.Run(a.String(), func(t *testing.T) {
			t.Parallel()
			rapid.Check(t, func(t *rapid.T) {
				l := drawAnyLimit(t, a)
				now := rapid.Int64Range(0, 2e18).Draw(t, "start")
				var s State
				for range rapid.IntRange(1, 40).Draw(t, "requests") {
					now += gap(t, l)
					cost := rapid.Int64Range(0, l.Capacity()).Draw(t, "cost")
					d, next := Decide(l, s, now, cost)
					if (!d.Allowed || cost == 0) && !next.Equal(s) {
						t.Fatalf("allowed=%v cost=%d changed the state", d.Allowed, cost)
					}
					if d.Limit != l.Capacity() || d.Remaining < 0 || d.Remaining > d.Limit {
						t.Fatalf("limit %d remaining %d (capacity %d)", d.Limit, d.Remaining, l.Capacity())
					}
					if d.Allowed == (d.RetryAfter > 0) {
						t.Fatalf("allowed=%v with retry-after %d", d.Allowed, d.RetryAfter)
					}
					if !d.Allowed {
						if early, _ := Decide(l, s, now+int64(d.RetryAfter)-1, cost); early.Allowed {
							t.Fatalf("allowed 1ns before retry-after %d", d.RetryAfter)
						}
						if onTime, _ := Decide(l, s, now+int64(d.RetryAfter), cost); !onTime.Allowed {
							t.Fatalf("still denied at retry-after %d", d.RetryAfter)
						}
					}
					if (d.Remaining < d.Limit) != (d.RefillAfter > 0) {
						t.Fatalf("remaining %d of %d with refill-after %d", d.Remaining, d.Limit, d.RefillAfter)
					}
					if (d.Remaining == d.Limit) != (d.ResetAfter == 0) && a != SlidingWindowCounter {
						t.Fatalf("remaining %d of %d with reset-after %d", d.Remaining, d.Limit, d.ResetAfter)
					}
					expires := l.ExpiresAtNanos(next)
					if got := max(expires-now, 0); got != int64(d.ResetAfter) {
						t.Fatalf("expires %d after now, reset-after %d", got, d.ResetAfter)
					}
					probeCost := rapid.Int64Range(0, l.Capacity()).Draw(t, "probe cost")
					probeAt := max(expires, now) + rapid.Int64Range(0, int64(l.Period)).Draw(t, "probe after expiry")
					fromState, _ := Decide(l, next, probeAt, probeCost)
					fromNothing, _ := Decide(l, State{}, probeAt, probeCost)
					if fromState != fromNothing {
						t.Fatalf("at %d (expiry %d) the state decides %+v, no state %+v", probeAt, expires, fromState, fromNothing)
					}
					s = next
				}
			})
		})
	}
}

// TestBucketAlgorithmsAgree: token bucket, leaky bucket (meter) and GCRA
// decide identically for the same rate, period and burst.
func TestBucketAlgorithmsAgree(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		l := drawLimit(t)
		now := rapid.Int64Range(0, 2e18).Draw(t, "start")
		states := map[Algorithm]State{}
		for range rapid.IntRange(1, 50).Draw(t, "requests") {
			now += gap(t, l)
			cost := rapid.Int64Range(0, l.Burst).Draw(t, "cost")
			var first Decision
			for i, a := range []Algorithm{TokenBucket, LeakyBucket, GCRA} {
				la := l
				la.Algorithm = a
				d, next := Decide(la, states[a], now, cost)
				if i == 0 {
					first = d
				} else if d != first {
					t.Fatalf("%s decided %+v, token_bucket %+v", a, d, first)
				}
				states[a] = next
			}
		}
	})
}

// TestFixedWindowMatchesReference compares with a map of counts per aligned
// window, and checks that no window ever admits more than rate.
func TestFixedWindowMatchesReference(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		l := drawAnyLimit(t, FixedWindow)
		now := rapid.Int64Range(0, 2e18).Draw(t, "start")
		counts := map[int64]int64{}
		var s State
		for range rapid.IntRange(1, 60).Draw(t, "requests") {
			now += gap(t, l)
			cost := rapid.Int64Range(0, l.Rate).Draw(t, "cost")
			window := now / int64(l.Period)
			wantAllowed := counts[window]+cost <= l.Rate
			if wantAllowed {
				counts[window] += cost
			}
			d, next := Decide(l, s, now, cost)
			if d.Allowed != wantAllowed || d.Remaining != l.Rate-counts[window] {
				t.Fatalf("got allowed=%v remaining=%d, reference allowed=%v remaining=%d", d.Allowed, d.Remaining, wantAllowed, l.Rate-counts[window])
			}
			if counts[window] > l.Rate {
				t.Fatalf("window %d admitted %d > rate %d", window, counts[window], l.Rate)
			}
			s = next
		}
	})
}

// TestFixedWindowLetsTwiceTheRateThroughAtAnEdge shows the fixed window's known flaw:
// 100 requests in the last millisecond of a window and 100 in the first of
// the next are all admitted, 200 within 2ms under a limit of 100 a minute.
// The sliding window algorithms refuse the second hundred.
func TestFixedWindowLetsTwiceTheRateThroughAtAnEdge(t *testing.T) {
	t.Parallel()
	edge := int64(30_000_000) * int64(time.Minute) // a window boundary
	for _, tt := range []struct {
		algorithm Algorithm
		want      int
	}{{FixedWindow, 200}, {SlidingWindowLog, 100}, {SlidingWindowCounter, 100}} {
		l := Limit{Algorithm: tt.algorithm, Rate: 100, Period: time.Minute}
		var s State
		admitted := 0
		for i := range 200 {
			at := edge - int64(time.Millisecond) + int64(i/100)*int64(time.Millisecond)*2
			d, next := Decide(l, s, at, 1)
			if d.Allowed {
				admitted++
			}
			s = next
		}
		if admitted != tt.want {
			t.Errorf("%s admitted %d of 200 around the edge, want %d", tt.algorithm, admitted, tt.want)
		}
	}
}

// TestSlidingWindowLogMatchesReference compares with the full history of
// admissions, counting those in (now − period, now], and checks that no
// sliding window ever holds more than rate.
func TestSlidingWindowLogMatchesReference(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		l := drawAnyLimit(t, SlidingWindowLog)
		now := rapid.Int64Range(0, 2e18).Draw(t, "start")
		var history []int64 // one entry per admitted unit
		inWindow := func(end int64) int64 {
			n := int64(0)
			for _, at := range history {
				if at > end-int64(l.Period) && at <= end {
					n++
				}
			}
			return n
		}
		var s State
		for range rapid.IntRange(1, 60).Draw(t, "requests") {
			now += gap(t, l)
			cost := rapid.Int64Range(0, l.Rate).Draw(t, "cost")
			wantAllowed := inWindow(now)+cost <= l.Rate
			if wantAllowed {
				for range cost {
					history = append(history, now)
				}
			}
			d, next := Decide(l, s, now, cost)
			if d.Allowed != wantAllowed || d.Remaining != l.Rate-inWindow(now) {
				t.Fatalf("got allowed=%v remaining=%d, reference allowed=%v remaining=%d", d.Allowed, d.Remaining, wantAllowed, l.Rate-inWindow(now))
			}
			s = next
		}
		for _, at := range history {
			if n := inWindow(at); n > l.Rate {
				t.Fatalf("the window ending at %d holds %d > rate %d", at, n, l.Rate)
			}
		}
	})
}

// TestSlidingWindowCounterMatchesReference compares with the estimate
// previous × (period − elapsed)/period + current in exact rationals.
func TestSlidingWindowCounterMatchesReference(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		l := drawAnyLimit(t, SlidingWindowCounter)
		now := rapid.Int64Range(0, 2e18).Draw(t, "start")
		counts := map[int64]int64{}
		var s State
		for range rapid.IntRange(1, 60).Draw(t, "requests") {
			now += gap(t, l)
			cost := rapid.Int64Range(0, l.Rate).Draw(t, "cost")
			window := now / int64(l.Period)
			elapsed := now % int64(l.Period)
			estimate := new(big.Rat).SetFrac(
				new(big.Int).Mul(big.NewInt(counts[window-1]), big.NewInt(int64(l.Period)-elapsed)),
				big.NewInt(int64(l.Period)))
			estimate.Add(estimate, big.NewRat(counts[window], 1))
			wantAllowed := new(big.Rat).Add(estimate, big.NewRat(cost, 1)).Cmp(big.NewRat(l.Rate, 1)) <= 0
			if wantAllowed {
				counts[window] += cost
				estimate.Add(estimate, big.NewRat(cost, 1))
			}
			left := new(big.Rat).Sub(big.NewRat(l.Rate, 1), estimate)
			wantRemaining := new(big.Int).Quo(left.Num(), left.Denom()).Int64() // floor, left ≥ 0
			d, next := Decide(l, s, now, cost)
			if d.Allowed != wantAllowed || d.Remaining != wantRemaining {
				t.Fatalf("got allowed=%v remaining=%d, reference allowed=%v remaining=%d", d.Allowed, d.Remaining, wantAllowed, wantRemaining)
			}
			s = next
		}
	})
}

func TestWindowTimes(t *testing.T) {
	t.Parallel()
	start := int64(30_000_000) * int64(time.Minute)
	tests := []struct {
		name  string
		limit Limit
		spend []int64 // offsets (ms) of cost-1 requests before the probe
		at    int64   // probe offset, ms
		cost  int64
		want  Decision
	}{
		{"fixed window: reset at the window's end", Limit{Algorithm: FixedWindow, Rate: 3, Period: time.Minute}, []int64{0, 1000}, 15000, 1,
			Decision{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 45e9, RefillAfter: 45e9}},
		{"fixed window: denied until the next window", Limit{Algorithm: FixedWindow, Rate: 2, Period: time.Minute}, []int64{0, 1000}, 15000, 1,
			Decision{Limit: 2, Remaining: 0, ResetAfter: 45e9, RetryAfter: 45e9, RefillAfter: 45e9}},
		{"sliding log: retry when the oldest leaves", Limit{Algorithm: SlidingWindowLog, Rate: 2, Period: time.Minute}, []int64{0, 1000}, 15000, 1,
			Decision{Limit: 2, Remaining: 0, ResetAfter: 46e9, RetryAfter: 45e9, RefillAfter: 45e9}},
		{"sliding counter: the previous window weighs less as time passes", Limit{Algorithm: SlidingWindowCounter, Rate: 4, Period: time.Minute}, []int64{0, 0, 0, 0}, 75000, 1,
			// 15s into the next window the previous 4 weigh 4×45/60 = 3.
			Decision{Allowed: true, Limit: 4, Remaining: 0, ResetAfter: 105e9, RefillAfter: 15e9}},
		{"sliding counter: retry when the weight has fallen enough", Limit{Algorithm: SlidingWindowCounter, Rate: 4, Period: time.Minute}, []int64{0, 0, 0, 0}, 60000, 2,
			Decision{Limit: 4, Remaining: 0, ResetAfter: 60e9, RetryAfter: 30e9, RefillAfter: 15e9}},
		{"sliding counter: a retry that is not a whole nanosecond rounds up", Limit{Algorithm: SlidingWindowCounter, Rate: 3, Period: time.Minute}, []int64{0, 0, 0}, 60000, 1,
			// 3×(60s−e)/60s ≤ 2 from e = 20s exactly.
			Decision{Limit: 3, Remaining: 0, ResetAfter: 60e9, RetryAfter: 20e9, RefillAfter: 20e9}},
		{"sliding counter: a fractional nanosecond wait rounds up", Limit{Algorithm: SlidingWindowCounter, Rate: 7, Period: time.Minute}, []int64{0, 0, 0, 0, 0, 0, 0}, 60000, 1,
			// 7×(60s−e)/60s ≤ 6 from e = 8.571428571…s: never report a wait that is early.
			Decision{Limit: 7, Remaining: 0, ResetAfter: 60e9, RetryAfter: 8571428572, RefillAfter: 8571428572}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s State
			for _, ms := range tt.spend {
				var d Decision
				d, s = Decide(tt.limit, s, start+ms*int64(time.Millisecond), 1)
				if !d.Allowed {
					t.Fatalf("spend at %dms denied", ms)
				}
			}
			if got, _ := Decide(tt.limit, s, start+tt.at*int64(time.Millisecond), tt.cost); got != tt.want {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestConvertCarriesUsage(t *testing.T) {
	t.Parallel()
	now := int64(30_000_000) * int64(time.Minute)
	perMinute := func(a Algorithm, rate, burst int64) Limit {
		return Limit{Algorithm: a, Rate: rate, Period: time.Minute, Burst: burst}
	}
	tests := []struct {
		name          string
		from, to      Limit
		spend         int64
		wantRemaining int64
	}{
		{"a bigger bucket keeps what was used", perMinute(TokenBucket, 10, 10), perMinute(TokenBucket, 100, 100), 7, 93},
		{"a smaller bucket is used up to its capacity", perMinute(TokenBucket, 10, 10), perMinute(TokenBucket, 5, 5), 7, 0},
		{"an unused key stays unused", perMinute(TokenBucket, 10, 10), perMinute(TokenBucket, 5, 5), 0, 5},
		{"a bucket becomes a window", perMinute(TokenBucket, 10, 10), perMinute(FixedWindow, 20, 0), 4, 16},
		{"a log becomes a counter", perMinute(SlidingWindowLog, 10, 0), perMinute(SlidingWindowCounter, 10, 0), 3, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s State
			if tt.spend > 0 {
				_, s = Decide(tt.from, s, now, tt.spend)
			}
			converted := Convert(tt.from, s, tt.to, now)
			if !tt.to.ValidState(converted) {
				t.Fatalf("converted state %+v is not valid under %+v", converted, tt.to)
			}
			if d, _ := Decide(tt.to, converted, now, 0); d.Remaining != tt.wantRemaining {
				t.Fatalf("remaining %d after conversion, want %d", d.Remaining, tt.wantRemaining)
			}
		})
	}
}
