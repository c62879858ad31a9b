package health

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// Quorum is what a node without a leader found when it last asked its
// configuration's voters who answers: what /readyz says it waits for.
type Quorum struct {
	wait atomic.Pointer[quorumWait]
}

type quorumWait struct {
	voters int
	silent []raft.Server
}

// Probe asks every voter of servers whether it answers (silentOf returns
// those that do not), for a node that knows no leader: without a quorum of
// them answering, no leader can be elected, and the operator needs to know
// which are missing.
func (q *Quorum) Probe(servers []raft.Server, silentOf func([]raft.Server) []raft.Server) {
	voters := Voters(servers)
	q.wait.Store(&quorumWait{voters: len(voters), silent: silentOf(voters)})
}

// Clear forgets the last probe (this node knows a leader).
func (q *Quorum) Clear() { q.wait.Store(nil) }

// NoLeaderReason says why a member knows no leader, from the latest Probe.
func (q *Quorum) NoLeaderReason() string {
	w := q.wait.Load()
	switch {
	case w == nil:
		return "no leader known"
	case len(w.silent) > w.voters-(w.voters/2+1):
		return fmt.Sprintf("no leader known: waiting for a quorum of %d of the %d voters; not answering: %s (a cluster restarts once a majority of its voters run: start them)",
			w.voters/2+1, w.voters, DescribeServers(w.silent))
	default:
		return "no leader known: an election is under way"
	}
}

// Voters returns the voters of servers.
func Voters(servers []raft.Server) []raft.Server {
	var voters []raft.Server
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, s)
		}
	}
	return voters
}

// DescribeServers names servers as "n2 at 127.0.0.1:8002, ...".
func DescribeServers(servers []raft.Server) string {
	parts := make([]string, len(servers))
	for i, s := range servers {
		parts[i] = fmt.Sprintf("%s at %s", s.ID, s.Address)
	}
	return strings.Join(parts, ", ")
}
