// Package testhooks gives this module's test packages (testcluster,
// faulttest) what package cluster keeps from embedding programs: crashing a
// node, and reading the digest of its replicated state. Package cluster sets
// the hooks when it is initialised; they take a *cluster.Node (as an
// io.Closer, since this package cannot name the type).
package testhooks

import "io"

var (
	// AbortNode stops a *cluster.Node at once, as a crash would as far as
	// the cluster can tell: no hand-over of leadership, pending requests
	// fail. The node can be reopened from its data directory.
	AbortNode func(node io.Closer) error
	// NodeDigest returns the index of the last log entry a *cluster.Node
	// applied and a digest of its replicated state: replicas at the same
	// index must have the same digest.
	NodeDigest func(node io.Closer) (uint64, [32]byte)
	// NodeLimitsDigest is NodeDigest without the members' HTTP addresses:
	// what a backup carries from one cluster to another.
	NodeLimitsDigest func(node io.Closer) (uint64, [32]byte)
	// SkipRaiseWait breaks a *cluster.Node on purpose: as leader, it
	// acknowledges a command that gives capacity back without waiting
	// for the deny leases that could contradict it to end. The fault
	// suite shows that this is caught.
	SkipRaiseWait func(node io.Closer)
	// BreakAppends makes every append to a *cluster.Node's log fail as on
	// a full disk (fail), hang as on a stuck one (stall), or, with
	// neither, work again.
	BreakAppends func(node io.Closer, fail, stall bool)
)
