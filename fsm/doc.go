// Package fsm is limitnode's replicated state machine: the Raft log's
// commands, how they are applied, and how the state is snapshotted and
// restored.
//
// A command is one log entry: a type byte, then a msgpack body
// ([CommandType][body]). CommandAllow carries a whole batch of allow
// requests, so that many callers share one Raft entry (group commit), and the
// leader's clock reading for the batch.
//
// Invariant: apply is deterministic. Time comes from the command (and never
// runs backwards: the FSM uses the larger of the command's time and the last
// time it applied); the FSM reads no clock, draws no random numbers and never
// lets map iteration order reach its state or its snapshots. Idle state (a
// bucket that has refilled completely, a request ID older than DedupWindow)
// is deleted by the same rule on every replica, driven by command time.
//
// Every request in an entry is validated again with package contract's
// rules before it is decided, so a corrupt or hand-built entry cannot reach
// the arithmetic with values it would overflow on; a refusal is a
// *contract.Error in the request's result and changes nothing.
//
// The package does not talk to the network, choose a leader or batch
// requests: that is package cluster. It does not know HTTP.
package fsm
