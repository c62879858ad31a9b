// Package health is what a node knows of its own health and its members':
// the leader's view of every member, sent to each in its pings (View, built
// by a Round), how far this node trails the leader's applied index
// (Progress), whether it can write to its data directory (Disk), and, while
// it knows no leader, which voters it waits for (Quorum). /readyz and
// /v1/cluster answer from them.
//
// The package holds no Raft state of its own and sends nothing itself: the
// node gives a Round its configuration and a function that pings a member.
package health
