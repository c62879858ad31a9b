// Package algorithms holds the rate-limiting algorithms of limitnode as pure
// functions: a key's state, its limit, a cost and the current time go in; a
// decision and the key's next state come out.
//
// The package deliberately does no I/O, starts no goroutines, reads no clock
// and keeps no maps: the caller (the replicated state machine in package fsm)
// passes the time it was given by the Raft leader, so every replica that
// applies the same command computes the same decision and the same state.
//
// All arithmetic is on integers: times are nanoseconds since the Unix epoch,
// and fractions of a token are carried exactly as a remainder (see State).
// Products that could exceed 64 bits (cost × period for a period of a year and
// a rate of a billion) are computed in 128 bits with math/bits.
//
// Invariant: Decide never panics for a limit that Validate accepted and a cost
// that ValidateCost accepted, and a denied request or a request of cost 0
// returns the state it was given, unchanged.
package algorithms
