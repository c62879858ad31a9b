// Package cluster runs one limitnode member: hashicorp/raft over TCP with
// raft-boltdb for the log and stable store and a file snapshot store, all
// under one data directory, plus the small Go API that both the HTTP server
// and programs that embed a node use (Open, Node.Allow, Node.Join,
// Node.RemoveMember, Node.Status, Node.Close).
//
// How a request is decided:
//
//   - On the leader, Allow hands the request to a batcher (group commit):
//     when nothing is in flight it is appended at once; while an entry is in
//     flight, new requests gather and go out together in the next entry. The
//     leader stamps each entry with its clock; the FSM decides.
//   - On a follower, the same kind of batcher forwards gathered requests to
//     the leader in one message over a pooled TCP connection to the leader's
//     Raft address (a one-byte header tells Raft's connections from
//     forwarding ones). The leader feeds them into its own group commit and
//     the follower returns the leader's decisions unchanged.
//
// Nothing is admitted twice: a request is sent again (to a new leader) only
// when Raft or the network guarantees it was not appended (not the leader,
// never sent), or when it carries a request ID, which the FSM answers with
// the first result. Otherwise the caller gets ErrOutcomeUnknown.
//
// Raft's errors do not leave this package: they become ErrNoLeader,
// ErrOutcomeUnknown, ErrShutdown and the other sentinels. The package knows
// nothing of HTTP.
package cluster
