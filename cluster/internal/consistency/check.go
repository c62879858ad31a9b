package consistency

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/contract"
)

// Check is an on-demand check, run on the leader: it appends a checkpoint
// (appendCheckpoint returns its index), waits until every member of the
// configuration (servers) has taken its digest there (or ctx ends), asking
// each other member for its latest with latestOf, then says which agree
// with this leader's. A member that did not answer in time is listed with
// Agrees nil.
func Check(ctx context.Context, digests *Digests, selfID string, servers func() ([]raft.Server, error), appendCheckpoint func() (uint64, error), latestOf func(ctx context.Context, addr string) (Checkpoint, error)) (contract.ConsistencyReport, error) {
	index, err := appendCheckpoint()
	if err != nil {
		return contract.ConsistencyReport{}, err
	}
	report := contract.ConsistencyReport{Index: index}
	members, err := servers()
	if err != nil {
		return report, err
	}
	for _, s := range members {
		result := contract.MemberConsistency{ID: string(s.ID)}
		latest := digests.Latest
		if string(s.ID) != selfID {
			latest = func() Checkpoint {
				theirs, err := latestOf(ctx, string(s.Address))
				if err != nil {
					return Checkpoint{}
				}
				return theirs
			}
		}
		if agrees, ok := digests.awaitAgreement(ctx, latest, index); ok {
			result.Agrees = &agrees
		}
		report.Members = append(report.Members, result)
	}
	return report, nil
}

// awaitAgreement waits until a member has taken its digest at index (or a
// later checkpoint this leader also has), polling latest, and compares it
// with this leader's; ok is false when ctx ended first.
func (d *Digests) awaitAgreement(ctx context.Context, latest func() Checkpoint, index uint64) (agrees, ok bool) {
	for {
		if theirs := latest(); theirs.Index >= index {
			if agrees, comparable := d.Compare(theirs); comparable {
				return agrees, true
			}
		}
		select {
		case <-ctx.Done():
			return false, false
		case <-time.After(20 * time.Millisecond):
		}
	}
}
