package consistency

import (
	"log/slog"

	"github.com/hashicorp/raft"
)

// A member whose state differs from the leader's must not lead: it would
// decide against that state. So the leader demotes it to a non-voter
// (hashicorp/raft's DemoteVoter: it keeps replicating, but neither votes
// nor stands for election), as long as the voters that agree with the
// leader remain a quorum without it; when a later checkpoint agrees (its
// data was removed and it caught up again, or a restore replaced every
// node's state), it is made a voter again. This cluster has no non-voters
// of its own choosing, so every non-voter it promotes is one it demoted.

// Agreement is what the leader's latest health round knows of one
// member's state.
type Agreement struct {
	// DivergedAt is the checkpoint index at which the member's state
	// differed from the leader's, or 0.
	DivergedAt uint64
	// AgreedAt is the checkpoint index at which it last agreed, or 0 since
	// it differs.
	AgreedAt uint64
}

// Enforce, on the leader selfID, demotes the voters of servers that differ
// from it and promotes the non-voters that agree with it again, from the
// agreement of each member (by ID) that one health round found.
func Enforce(r *raft.Raft, selfID string, servers []raft.Server, members map[string]Agreement, logger *slog.Logger) {
	agreeing, voters := 0, 0
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if members[string(s.ID)].DivergedAt == 0 {
			agreeing++
		}
	}
	for _, s := range servers {
		a, known := members[string(s.ID)]
		switch {
		case !known || string(s.ID) == selfID:
		case s.Suffrage == raft.Voter && a.DivergedAt != 0:
			// After the demotion the voters are one fewer; those that
			// agree must be a quorum of them.
			if agreeing < (voters-1)/2+1 {
				logger.Error("a member's state differs from the leader's, but demoting it would leave fewer agreeing voters than a quorum: it stays a voter", "member", s.ID, "index", a.DivergedAt)
				continue
			}
			if err := r.DemoteVoter(s.ID, 0, 0).Error(); err != nil {
				logger.Warn("demoting a member whose state differs", "member", s.ID, "err", err)
				continue
			}
			voters--
			logger.Warn("made a member whose state differs from the leader's a non-voter, so that it cannot lead", "member", s.ID, "index", a.DivergedAt)
		case s.Suffrage == raft.Nonvoter && a.DivergedAt == 0 && a.AgreedAt != 0:
			if err := r.AddVoter(s.ID, s.Address, 0, 0).Error(); err != nil {
				logger.Warn("making a member that agrees again a voter", "member", s.ID, "err", err)
				continue
			}
			logger.Info("a member's state agrees with the leader's again: it is a voter again", "member", s.ID, "index", a.AgreedAt)
		}
	}
}
