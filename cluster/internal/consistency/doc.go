// Package consistency checks that the replicas of a cluster hold the same
// state. Replicas that apply the same log hold the same state; a bad disk,
// a bug or a forged entry can break that silently. As etcd does, the leader
// appends a checkpoint every ConsistencyCheckEvery (and on demand): every
// replica takes the digest of its state at that index (Digests), and the
// leader's health round compares each member's digest with its own
// (Digests.Compare). A member that differs is logged loudly and marked: it
// answers /readyz 503 until a later checkpoint agrees, and the leader makes
// it a non-voter meanwhile (Enforce).
//
// The package appends nothing and sends nothing itself: the node gives it
// the functions that append a checkpoint and ask a member for its latest.
package consistency
