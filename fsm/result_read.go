package fsm

import (
	"time"

	"github.com/limitnode/limitnode/internal/holdtime"
)

// WaitsShortenedBy is r as it reads elapsed later: its checks' waits
// shorter by elapsed, and a denied check's retry at least a millisecond
// away (holdtime), on a copy of its checks.
func (r Result) WaitsShortenedBy(elapsed time.Duration) Result {
	out := r
	out.Checks = make([]CheckResult, len(r.Checks))
	copy(out.Checks, r.Checks)
	for i := range out.Checks {
		d := &out.Checks[i].Decision
		d.ResetAfter, d.RefillAfter = time.Duration(holdtime.Shorten(int64(d.ResetAfter), elapsed)), time.Duration(holdtime.Shorten(int64(d.RefillAfter), elapsed))
		if !d.Allowed {
			d.RetryAfter = time.Duration(holdtime.RetryAfter(int64(d.RetryAfter), elapsed))
		}
	}
	return out
}

// GrantsLocalAnswers reports whether r lets a node answer on its own
// later: a denial that says how long it holds (a deny lease), or a share
// granted.
func (r *Result) GrantsLocalAnswers() bool { return r.DenyForNanos > 0 || r.Share != nil }

// TookTheLast reports whether r admitted its request with nothing left
// under one of its checks: the next request of its kind will likely be
// denied.
func (r *Result) TookTheLast() bool {
	if !r.Allowed {
		return false
	}
	for i := range r.Checks {
		if r.Checks[i].Decision.Remaining == 0 {
			return true
		}
	}
	return false
}
