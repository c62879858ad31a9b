// Package denylease is a node's table of deny leases: denials answered where
// they arrive, on any node, without a round trip. A denial consumes nothing,
// and as only time passes a denied request stays denied until the longest
// wait of the checks that deny it (time only adds capacity, under every
// algorithm). So when the leader denies a request it says for how long
// (fsm.Result.DenyForNanos), and the node that asked may answer the same
// request with the same denial until then, measured on its own monotonic
// clock from when it sent the request: the leader decided after that, so the
// lease ends no later than the denial does. Two bounds keep it there:
// cluster time runs at most the cluster's MaxClockRate faster than real
// time, which the lease gives away, and a lease lasts at most the table's
// cap (cluster.Config.DenyLeaseCap).
//
// What could make the denial wrong is a command that gives capacity back
// (fsm.EffectOf: a policy or domain changed, a key reset, a block lifted, a
// refund, a share given back, a restore). Such a command is acknowledged
// only once every lease that could contradict it has ended: the leader waits
// out the cap after it applied the command, unless it granted no lease for
// that long (Grants.RaiseWait). Every node also drops its leases when it
// applies one, so that most see the change at once (Table.Clear); the wait
// is what the guarantee rests on.
//
// When a lease ends, the next request of its kind goes to the leader alone:
// the others that arrive meanwhile wait for its answer (a new lease, or the
// news that it was admitted) instead of all going to the log.
package denylease
