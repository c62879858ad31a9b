package algorithms

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// Algorithm names one rate-limiting algorithm. The zero value is TokenBucket,
// the default.
type Algorithm uint8

// The algorithms limitnode offers. The values are stored in the Raft log and
// in snapshots: never renumber one.
const (
	TokenBucket Algorithm = iota
	LeakyBucket
	GCRA
	FixedWindow
	SlidingWindowLog
	SlidingWindowCounter
)

var algorithmNames = [...]string{
	TokenBucket:          "token_bucket",
	LeakyBucket:          "leaky_bucket",
	GCRA:                 "gcra",
	FixedWindow:          "fixed_window",
	SlidingWindowLog:     "sliding_window_log",
	SlidingWindowCounter: "sliding_window_counter",
}

// String returns the algorithm's name as it appears in the HTTP API.
func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// ParseAlgorithm returns the algorithm with the given API name. The empty
// name is the default, TokenBucket.
func ParseAlgorithm(name string) (Algorithm, error) {
	if name == "" {
		return TokenBucket, nil
	}
	for i, n := range algorithmNames {
		if n == name {
			return Algorithm(i), nil
		}
	}
	return 0, fmt.Errorf("unknown algorithm %q", name)
}

// IsBucket reports whether the algorithm is one of the bucket algorithms
// (token_bucket, leaky_bucket, gcra), whose capacity is Burst. The others
// are window algorithms, whose capacity is Rate and which take no Burst.
func (a Algorithm) IsBucket() bool { return a == TokenBucket || a == LeakyBucket || a == GCRA }

// Bounds on a limit's parameters. They are part of the HTTP contract and are
// documented in docs/http-api.md; each exists so that every intermediate product in
// Decide fits in 64 bits (or in 128 bits where math/bits is used).
const (
	// MaxRate is the largest rate accepted, in requests per period.
	MaxRate = 1_000_000_000
	// MaxBurst is the largest bucket capacity accepted.
	MaxBurst = 1_000_000_000
	// MinPeriod and MaxPeriod bound the period of a limit.
	MinPeriod = time.Millisecond
	MaxPeriod = 8760 * time.Hour
	// MaxFillTime bounds burst × period / rate: the time an empty bucket
	// takes to refill completely. Fifty years keeps "now + 2 × fill time"
	// (the furthest a theoretical arrival time can reach) far below the
	// largest int64 nanosecond timestamp (year 2262).
	MaxFillTime = 50 * 8760 * time.Hour
	// MaxWait bounds how long a reservation may make a caller wait (see
	// Reserve).
	MaxWait = time.Hour
)

// Limit is a rate limit: at most Rate units of cost per Period, and
// for the bucket algorithms at most Burst at once. Window algorithms have
// Burst 0. The same key under two different Limits is two counters.
type Limit struct {
	Algorithm Algorithm
	Rate      int64
	Period    time.Duration
	Burst     int64
}

// Errors returned by Validate and ValidateCost, one per rule, so that a
// caller can tell which parameter is at fault with errors.Is (package
// contract names the API field for each).
var (
	ErrUnknownAlgorithm = errors.New("algorithm is not supported")
	ErrRate             = fmt.Errorf("rate must be an integer from 1 to %d", MaxRate)
	ErrPeriod           = fmt.Errorf("period must be from %s to %s", MinPeriod, MaxPeriod)
	ErrBurst            = fmt.Errorf("burst must be an integer from 1 to %d", MaxBurst)
	ErrFillTime         = fmt.Errorf("burst / rate × period (the time to refill an empty bucket) must be at most %s", MaxFillTime)
	ErrCost             = errors.New("cost must be an integer from 0 to the most the limit can admit at once")
	ErrBurstWithWindow  = errors.New("burst applies to token_bucket, leaky_bucket and gcra only")
	ErrLogRate          = fmt.Errorf("sliding_window_log keeps one timestamp per admitted unit, so its rate is at most %d; use sliding_window_counter for larger rates", MaxLogRate)
)

// Validate reports whether the limit can be decided by Decide without
// overflow. The error is one of the Err variables above, possibly wrapped.
func (l Limit) Validate() error {
	switch {
	case int(l.Algorithm) >= len(algorithmNames):
		return fmt.Errorf("%w: %s", ErrUnknownAlgorithm, l.Algorithm)
	case l.Rate < 1 || l.Rate > MaxRate:
		return ErrRate
	case l.Period < MinPeriod || l.Period > MaxPeriod:
		return ErrPeriod
	case l.Algorithm == SlidingWindowLog && l.Rate > MaxLogRate:
		return ErrLogRate
	case !l.Algorithm.IsBucket() && l.Burst != 0:
		return ErrBurstWithWindow
	case !l.Algorithm.IsBucket():
		return nil
	case l.Burst < 1 || l.Burst > MaxBurst:
		return ErrBurst
	}
	// burst ≤ 1e9 and period ≤ 3.2e16 ns, so the product fits in 128 bits
	// and the quotient by rate ≥ 1 needs a check before Div64.
	hi, lo := bits.Mul64(uint64(l.Burst), uint64(l.Period))
	if hi >= uint64(l.Rate) {
		return ErrFillTime
	}
	fill, _ := bits.Div64(hi, lo, uint64(l.Rate))
	if fill > uint64(MaxFillTime) {
		return ErrFillTime
	}
	return nil
}

// ValidateCost reports whether cost can ever be admitted under the limit:
// from 0 to Capacity. The error wraps ErrCost.
func (l Limit) ValidateCost(cost int64) error {
	if cost < 0 || cost > l.Capacity() {
		return fmt.Errorf("%w (%d)", ErrCost, l.Capacity())
	}
	return nil
}

// Capacity is the most cost the limit can admit at once: Burst for the
// bucket algorithms, Rate for the window algorithms.
func (l Limit) Capacity() int64 {
	if l.Algorithm.IsBucket() {
		return l.Burst
	}
	return l.Rate
}

// Decision is the outcome of one check against one limit.
type Decision struct {
	// Allowed reports whether the cost was admitted (and consumed).
	Allowed bool
	// Limit is the most that can be admitted at once (Capacity).
	Limit int64
	// Remaining is what can still be admitted right after this decision,
	// rounded down to whole units.
	Remaining int64
	// ResetAfter is the time until the limit is fully available again.
	ResetAfter time.Duration
	// RetryAfter is zero when allowed; otherwise the time until the
	// same request could be allowed, rounded up to the nanosecond.
	RetryAfter time.Duration
	// RefillAfter is the time until at least one more unit becomes
	// available (zero when the limit is fully available).
	RefillAfter time.Duration
	// Wait, for a request admitted by reservation (Reserve), is the
	// time the caller must wait before going on; zero otherwise. Last, so
	// that decisions recorded before it decode without it.
	Wait time.Duration
}

// NearLimit reports whether an admitted decision left 20% of its limit or
// less: the "near limit" that metrics count (as envoyproxy/ratelimit's
// near_limit does).
func (d Decision) NearLimit() bool {
	return d.Allowed && d.Limit > 0 && 5*d.Remaining <= d.Limit
}
