// Package contract is limitnode's request contract: what a caller may ask
// for (checks of limits, policies, leases, members), the bounds on every
// value, and the one validation of each rule.
//
// Every surface calls the same functions: the HTTP API (package httpapi),
// the Go API of an embedded node (package cluster), the replicated state
// machine when it re-checks a log entry (package fsm), and the client's
// local fallback (package client). So a rule is written once, and a caller
// gets the same message from each.
//
// A refusal is an *Error: a machine-readable Code, a Message for a person,
// and the Field at fault named as the HTTP API's JSON path ("limit.rate",
// "checks[1].policy"). Those JSON names are part of this contract, which is
// why they are spelled here and nowhere else.
//
// The package holds no state, does no I/O and reads no clock.
package contract
