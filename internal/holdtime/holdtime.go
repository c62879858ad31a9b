// Package holdtime is the arithmetic of answers given without the log, on
// the clock of whoever gives them: a deny lease (a denial repeated until
// it may no longer hold) and a share (units spent until the grant's end).
// Both count from the moment the request that brought them was sent, on
// the holder's monotonic clock, and both must end no later than the
// cluster time their grant names. Cluster time may run up to rate faster
// than real time (the leader clamps its stamps so: see package cluster's
// clock), and two machines' monotonic clocks tick at slightly different
// rates, which Margin covers.
//
// Every holder computes with these functions: the nodes' deny leases and
// shares (package cluster) and the Go client's shares (package client), so
// that the rule is written, and tested, once.
package holdtime

import "time"

// Margin is given away at the end of every held answer, for monotonic
// clocks that tick at slightly different rates on different machines; it
// is also the shortest retry a held denial tells a caller to wait.
const Margin = time.Millisecond

// Lasts is how long after its request was sent an answer may be held,
// when the leader decided it at cluster time t and it holds until cluster
// time t+span: span in real time at the fastest cluster time may run
// (1+rate), less Margin. The request was sent before t, so the holder's
// deadline falls before t+span whatever the network delay.
func Lasts(span int64, rate float64) time.Duration {
	return time.Duration(float64(span)/(1+rate)) - Margin
}

// LatestClusterTime is the latest cluster time it may be elapsed after a
// request whose answer the leader decided at cluster time at was sent: at
// plus elapsed, at the fastest cluster time may run. A held answer states
// that time, so that the caller is never told a moment earlier than the
// true one.
func LatestClusterTime(at int64, elapsed time.Duration, rate float64) int64 {
	e := int64(elapsed)
	return at + e + int64(float64(e)*rate)
}

// Shorten is a wait the leader stated (nanoseconds), elapsed later: never
// below 0.
func Shorten(wait int64, elapsed time.Duration) int64 {
	return max(wait-int64(elapsed), 0)
}

// RetryAfter is a denial's retry the leader stated (nanoseconds), elapsed
// later: never below Margin, so that a held denial never tells a caller to
// retry at once.
func RetryAfter(retry int64, elapsed time.Duration) int64 {
	return max(retry-int64(elapsed), int64(Margin))
}
