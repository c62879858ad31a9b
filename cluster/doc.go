// Package cluster runs one limitnode member: hashicorp/raft over TCP with
// raft-boltdb for the log and stable store and a file snapshot store, all
// under one data directory, plus the Go API that both the HTTP server and
// programs that embed a node use (Open, Node.Allow, Node.AllowBatch,
// Node.Join, Node.RemoveMember, Node.PutPolicy, Node.AcquireLease,
// Node.Status, Node.Close). Requests and answers are package contract's
// types; this package decides where a request goes, not what it means.
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
// the first result. Otherwise the caller gets contract.ErrOutcomeUnknown.
//
// Raft's errors do not leave this package: they become contract.ErrNoLeader,
// contract.ErrOutcomeUnknown or contract.ErrShutdown, and a request refused
// as it stands is a *contract.Error. The package knows nothing of HTTP.
//
// Files: config.go (Config and its defaults), node.go (opening the stores
// and Raft), allow.go (the allow API), groupcommit.go (routing a request to
// the leader's entry), batcher.go (group commit), leader.go (reaching the
// leader, with retries), forward.go and mux.go (the forwarding protocol on
// the Raft port), apply.go (one command through the log), membership.go,
// policies.go, leases.go, status.go, clock.go (the leader's stamp),
// snapshots.go (paced snapshot writes), shutdown.go.
package cluster
