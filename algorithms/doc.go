// Package algorithms holds the rate-limiting algorithms of limitnode as pure
// functions: a key's state, its limit, a cost and the current time go in; a
// decision and the key's next state come out (Decide).
//
// The package deliberately does no I/O, starts no goroutines, reads no clock
// and keeps no maps: the caller (the replicated state machine in package fsm)
// passes the time it was given by the Raft leader, so every replica that
// applies the same command computes the same decision and the same state.
//
// All arithmetic is on integers: times are nanoseconds since the Unix epoch,
// fractions of a token are carried exactly as a remainder, and products that
// could exceed 64 bits (cost × period for a period of a year and a rate of a
// billion) are computed in 128 bits with math/bits. Every wait a decision
// reports (retry-after, reset-after) is exact and rounded up: one nanosecond
// earlier the request would still be denied.
//
// Invariants, each checked by a property test: Decide never panics for a
// limit that Validate accepted and a cost that ValidateCost accepted; a
// denied request or a request of cost 0 returns the state it was given; from
// Limit.ExpiresAtNanos on, a state decides exactly like no state, so it can
// be deleted.
//
// # Choosing an algorithm
//
// All six answer the same request with the same response fields. "limit" in
// a response is the most that can pass at once: burst for the buckets, rate
// for the windows.
//
//	algorithm               state per key              at most in any period-long window   use it for
//	token_bucket (default)  1 instant (TAT)            burst + rate                        APIs: lets clients burst, holds the average
//	leaky_bucket            1 instant                  burst + rate                        the same decisions as token_bucket, seen as a draining level; burst 1 spaces requests evenly
//	gcra                    1 instant                  burst + rate                        the same decisions again, in redis-cell's form
//	fixed_window            window start + 1 count     2 × rate (at a window edge)          coarse quotas (per day, per month): cheapest, easy to explain
//	sliding_window_counter  window start + 2 counts    < 2 × rate, usually ≈ rate           edge limiting at large rates: cheap and close
//	sliding_window_log      1 timestamp per unit       rate, exactly                        exact limits at modest rates (rate ≤ 10,000)
//
// What each algorithm costs in memory per key, and how close the sliding
// window counter comes to the exact log (TestSlidingWindowAccuracyStudy),
// are measured figures: they are in docs/algorithms.md, with the commands
// that measure them.
package algorithms
