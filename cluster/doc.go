// Package cluster runs one limitnode member: hashicorp/raft with
// raft-boltdb for the log and stable store and a file snapshot store, all
// under one data directory, plus the Go API that both the HTTP and gRPC
// servers and programs that embed a node use (Open, Node.Allow,
// Node.AllowBatch, Node.Join, Node.RemoveMember, Node.PutPolicy,
// Node.AcquireLease, Node.Status, Node.Close). Requests and answers are
// package contract's types; this package decides where a request goes, not
// what it means (package fsm decides that, as every replica applies the
// log).
//
// How a request is decided:
//
//   - On the leader, Allow hands the request to a batcher (group commit):
//     when nothing is in flight it is appended at once; while an entry is in
//     flight, new requests gather and go out together in the next entry. The
//     leader stamps each entry with its clock; the FSM decides.
//   - On a follower, the same kind of batcher forwards gathered requests to
//     the leader in one message over a pooled connection to the leader's
//     Raft address (package internal/transport carries it). The leader
//     checks them, feeds them into its own group commit, and the follower
//     returns the leader's decisions unchanged.
//   - A denial consumes nothing, so the leader answers one from its applied
//     state, without an entry, once a round of heartbeats confirms it still
//     leads.
//
// Nothing is admitted twice: a request is sent again (to a new leader) only
// when Raft or the network guarantees it was not appended (not the leader,
// never sent), or when it carries a request ID, which the FSM answers with
// the first result. Otherwise the caller gets contract.ErrOutcomeUnknown.
//
// Membership changes are checked before they change anything (the new
// member must answer as itself, a running member is not evicted without
// Replace, a quorum of answering voters must remain without Force), and a
// data directory records the ID of the node it belongs to.
//
// What needs no Node lives in packages of its own under cluster/internal:
// clusterclock (the time a leader stamps), identity (whose data directory,
// which cluster), health (the members' view, the lag behind the leader, the
// disk probe), consistency (the checkpoints' digests compared), backupfile
// (the backup file's format), raftstore (the stores on disk, Recover),
// rafttransport (Raft's stream over the node's port) and denylease. The
// node wires them to its Raft; membership changes and restores are types
// of their own here (members, restorer), given the functions they use.
//
// Raft's errors do not leave this package: they become contract.ErrNoLeader,
// contract.ErrOutcomeUnknown or contract.ErrShutdown, and a request refused
// as it stands is a *contract.Error. The package knows nothing of HTTP.
// docs/ARCHITECTURE.md says which file holds which step.
package cluster
