package health

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitnode/limitnode/contract"
)

// Member is the leader's view of one member, as the ping of
// Every sees it. It travels in pings, so every member can show it.
type Member struct {
	ID string
	// SinceContactNanos is how long before the view was taken the member
	// last answered; -1: never. Durations, not instants, so that no two
	// nodes' clocks are compared.
	SinceContactNanos int64
	// Reachable is whether it answered the latest ping.
	Reachable bool
	// AppliedIndex is the member's applied index at its latest answer.
	AppliedIndex uint64
	// LeaderApplied is the leader's applied index at that moment, so the
	// member's lag can be told.
	LeaderApplied uint64
	// DivergedAt is the checkpoint index at which the member's state
	// differed from the leader's, or 0 (see cluster/internal/consistency).
	DivergedAt uint64
	// AgreedAt is the checkpoint index at which the member's state last
	// agreed with the leader's, or 0 since it differs.
	AgreedAt uint64
}

// View is the latest view of the members a node knows: its own as leader,
// or the one the leader last sent it.
type View struct {
	selfID string
	logger *slog.Logger

	mu      sync.Mutex
	members map[string]Member
	takenAt time.Time // when, by this node's monotonic clock, the view was true
	// divergedAt is a checkpoint at which the leader found this node's
	// state different, or 0.
	divergedAt atomic.Uint64
}

// NewView returns the empty view of node selfID.
func NewView(selfID string, logger *slog.Logger) *View {
	return &View{selfID: selfID, logger: logger}
}

// Set replaces the view with members as they were at takenAt.
func (v *View) Set(members []Member, takenAt time.Time) {
	m := make(map[string]Member, len(members))
	for _, h := range members {
		m[h.ID] = h
	}
	v.mu.Lock()
	v.members, v.takenAt = m, takenAt
	v.mu.Unlock()
}

// list returns the view as it is now: contact ages grown by the time since
// it was taken.
func (v *View) list() []Member {
	v.mu.Lock()
	defer v.mu.Unlock()
	aged := int64(time.Since(v.takenAt))
	out := make([]Member, 0, len(v.members))
	for _, h := range v.members {
		if h.SinceContactNanos >= 0 {
			h.SinceContactNanos += aged
		}
		out = append(out, h)
	}
	return out
}

func (v *View) get(id string) (Member, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	h, ok := v.members[id]
	if ok && h.SinceContactNanos >= 0 {
		h.SinceContactNanos += int64(time.Since(v.takenAt))
	}
	return h, ok
}

// Receive is a follower's answer to the leader's ping: members is the
// leader's view, true as the ping arrives. What it says of this node's
// state (DivergedAt) is kept, and logged when it first differs.
func (v *View) Receive(members []Member) {
	v.Set(members, time.Now())
	for _, h := range members {
		if h.ID == v.selfID {
			if old := v.divergedAt.Swap(h.DivergedAt); old == 0 && h.DivergedAt != 0 {
				v.logger.Error("this node's state differs from the leader's: it says it is not ready; restore it from a backup or remove its data and join it again", "index", h.DivergedAt)
			}
		}
	}
}

// DivergedAt is a checkpoint at which the leader found this node's state
// different from its own, or 0.
func (v *View) DivergedAt() uint64 { return v.divergedAt.Load() }

// Fill fills a member's status with what the view knows of it; leaderID is
// the leader this node knows, or "".
func (v *View) Fill(ms *contract.MemberStatus, leaderID string) {
	if leaderID == "" {
		return
	}
	h, ok := v.get(ms.ID)
	if !ok {
		return
	}
	health := contract.MemberHealth{Reachable: h.Reachable, AppliedIndex: h.AppliedIndex, SinceContact: -1, DivergedAt: h.DivergedAt}
	if h.SinceContactNanos >= 0 {
		health.SinceContact = time.Duration(h.SinceContactNanos)
	}
	if ms.ID == leaderID {
		health.SinceContact = 0
	}
	if h.LeaderApplied > h.AppliedIndex {
		health.Lag = h.LeaderApplied - h.AppliedIndex
	}
	ms.Health = &health
}
