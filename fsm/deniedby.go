package fsm

import (
	"strings"

	"github.com/limitnode/limitnode/contract"
)

// Every denial says what denied it (Result.DeniedBy): the check, the policy
// it was decided under and that policy's version, the log index of its last
// change, which every replica records when it applies the change, so that
// the answer names the rule exactly as the log holds it.

// deniedBy explains the denial of a request decided on targets, whose
// checks are reported in checks: the target blocked (blocked ≥ 0, by b),
// or else the check not in shadow mode that denies and frees up last.
func (f *FSM) deniedBy(targets []target, checks []CheckResult, blocked int, b *block) *contract.DeniedBy {
	i, cause := blocked, contract.CauseBlock
	if blocked < 0 {
		i, cause = -1, contract.CauseLimit
		for j := range targets {
			d := &checks[j].Decision
			if targets[j].shadow || d.Allowed {
				continue
			}
			if i < 0 || d.RetryAfter > checks[i].Decision.RetryAfter {
				i = j
			}
		}
		if i < 0 {
			return nil
		}
	} else if b.Penalty != "" {
		cause = contract.CausePenalty
	}
	t := &targets[i]
	out := &contract.DeniedBy{Check: i, Limit: *t.limit, Cause: cause}
	switch {
	case t.policy != nil:
		out.Policy, out.PolicyVersion = t.policy.policy.Name, t.policy.version
	case strings.HasPrefix(t.id.policy, rlsOwnerPrefix):
		out.Policy, out.PolicyVersion = t.id.policy, f.rlsVersions[strings.TrimPrefix(t.id.policy, rlsOwnerPrefix)]
	}
	return out
}
