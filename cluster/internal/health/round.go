package health

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/cluster/internal/consistency"
)

// Every is how often the leader asks every member how it is.
const Every = time.Second

// Answer is a member's answer to the leader's ping.
type Answer struct {
	NodeID       string
	AppliedIndex uint64
	Checkpoint   consistency.Checkpoint // the member's latest digest
}

// Round is the leader's health round: every Every it pings every other
// member, through the same (mutual TLS) channel as Raft, sending each the
// view of the previous round, so that a member that is down shows as
// unreachable on every survivor's /v1/cluster; it compares each member's
// latest digest with its own, and makes the members whose state differs
// non-voters (consistency.Enforce).
type Round struct {
	SelfID  string
	Raft    *raft.Raft
	View    *View
	Digests *consistency.Digests
	Logger  *slog.Logger
	// Ping asks the member at addr how it is, sending it the leader's view
	// and applied index.
	Ping func(ctx context.Context, addr string, view []Member, leaderApplied uint64) (Answer, error)
}

// Run runs one round.
func (r *Round) Run() {
	future := r.Raft.GetConfiguration()
	if future.Error() != nil {
		return
	}
	servers := future.Configuration().Servers
	previous := r.View.list()
	prev := make(map[string]Member, len(previous))
	for _, h := range previous {
		prev[h.ID] = h
	}
	start, applied := time.Now(), r.Raft.AppliedIndex()
	var mu sync.Mutex
	next := []Member{{ID: r.SelfID, Reachable: true, AppliedIndex: applied, LeaderApplied: applied}}
	var wg sync.WaitGroup
	for _, s := range servers {
		if string(s.ID) == r.SelfID {
			continue
		}
		wg.Go(func() {
			h := r.ping(s, prev, previous, applied)
			mu.Lock()
			next = append(next, h)
			mu.Unlock()
		})
	}
	wg.Wait()
	r.View.Set(next, start)
	agreement := make(map[string]consistency.Agreement, len(next))
	for _, h := range next {
		agreement[h.ID] = consistency.Agreement{DivergedAt: h.DivergedAt, AgreedAt: h.AgreedAt}
	}
	consistency.Enforce(r.Raft, r.SelfID, servers, agreement, r.Logger)
}

// ping asks one member how it is and returns what the round knows of it:
// prev is the previous round's view by ID, previous the same as sent.
func (r *Round) ping(s raft.Server, prev map[string]Member, previous []Member, applied uint64) Member {
	h, known := prev[string(s.ID)]
	if !known {
		h.SinceContactNanos = -1
	}
	h.ID, h.Reachable = string(s.ID), false
	ctx, cancel := context.WithTimeout(context.Background(), Every)
	defer cancel()
	answer, err := r.Ping(ctx, string(s.Address), previous, applied)
	if err != nil || answer.NodeID != string(s.ID) {
		return h
	}
	// Answered within this round: as of the round's start, contact is now.
	h.Reachable, h.SinceContactNanos, h.AppliedIndex, h.LeaderApplied = true, 0, answer.AppliedIndex, r.Raft.AppliedIndex()
	r.compare(&h, answer.Checkpoint)
	return h
}

// compare compares a member's latest digest with this leader's at the
// same index and updates h: DivergedAt becomes the index from which the
// member is known to differ (0 when it agrees; unchanged when it cannot be
// compared yet), AgreedAt the index at which it last agreed (0 once it
// differs).
func (r *Round) compare(h *Member, theirs consistency.Checkpoint) {
	agrees, comparable := r.Digests.Compare(theirs)
	switch {
	case !comparable:
	case agrees:
		h.DivergedAt, h.AgreedAt = 0, theirs.Index
	default:
		if h.DivergedAt == 0 {
			r.Logger.Error("a member's state differs from the leader's at the same log index: it says it is not ready, and stops voting; restore it from a backup or remove its data and join it again",
				"member", h.ID, "index", theirs.Index)
		}
		h.DivergedAt, h.AgreedAt = theirs.Index, 0
	}
}
