package fsm

import (
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

// QueuedStaleness bounds how old the applied state may be for DenyNow's
// queued rule: under load an entry is applied every few milliseconds; an
// older state (an idle key, a window that rolled over) is not trusted to
// deny what the clock would admit.
const QueuedStaleness = 50 * time.Millisecond

// DenyNow decides req on the state as applied, changing nothing, and
// reports whether the leader may answer it with a denial without a log
// entry (a denial consumes nothing). It may when req is denied at the
// latest applied cluster time, by a check not in shadow mode, with no check
// in shadow mode (a shadow check's denial is counted in the state), and
// either it is denied at clockNanos too (the leader's clock now, clamped to
// be no earlier) or the applied state is at most QueuedStaleness old and
// queued reports a request on the same key already on its way to the log,
// which will take what has refilled since (queued is asked only then, so
// the common case builds no key). A request with an ID always goes through
// the log: its first decision must be the one the FSM remembers, because
// another attempt with the same ID may still be on its way to the log (a
// forward held up in the network, an entry not yet committed) and would be
// decided afresh, perhaps admitted, after a denial answered here that
// nothing remembers.
//
// The result is decided at the applied time (AtNanos), so cluster time
// stays monotonic for every decision, whoever leads next. Its waits
// (RetryAfterNanos, ResetAfterNanos, RefillAfterNanos) are those at
// clockNanos, the true waits from now; for a request denied only because
// another is queued, the applied time's waits less the time since, the
// retry at least a millisecond. A denial at clockNanos says how long it
// holds from then (Result.DenyForNanos); one only because another request
// is queued says nothing of that. req must be valid (Request.Validate: the
// node checked it when it arrived); the caller must hold what makes the
// read linearizable: leadership confirmed after the request arrived, and
// every entry committed before then applied.
func (f *FSM) DenyNow(req *Request, clockNanos int64, queued func() bool) (Result, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.RequestID != "" {
		return Result{}, false
	}
	at := f.nowNanos
	res, ok := f.probeDenied(at, req)
	if !ok {
		return Result{}, false
	}
	clock := max(clockNanos, at)
	if clock == at {
		res.AtNanos = at
		res.DenyAtNanos, res.DenyForNanos = at, denyFor(req, res.Checks)
		return res, true
	}
	later, ok := f.probeDenied(clock, req)
	switch {
	case ok:
		for i := range res.Checks {
			d, l := &res.Checks[i].Decision, &later.Checks[i].Decision
			d.RetryAfterNanos, d.ResetAfterNanos, d.RefillAfterNanos = l.RetryAfterNanos, l.ResetAfterNanos, l.RefillAfterNanos
		}
		res.DenyAtNanos, res.DenyForNanos = clock, denyFor(req, res.Checks)
	case clock-at <= int64(QueuedStaleness) && queued():
		elapsed := clock - at
		for i := range res.Checks {
			d := &res.Checks[i].Decision
			d.ResetAfterNanos, d.RefillAfterNanos = max(d.ResetAfterNanos-elapsed, 0), max(d.RefillAfterNanos-elapsed, 0)
			if !d.Allowed {
				d.RetryAfterNanos = max(d.RetryAfterNanos-elapsed, int64(1e6))
			}
		}
	default:
		return Result{}, false
	}
	res.AtNanos = at
	return res, true
}

// probeDenied decides req at now without storing anything, and reports
// whether it is denied with no check in shadow mode. Checks that would
// allow are reported as they stand (decided with cost 0), as decide does
// for a denied request.
func (f *FSM) probeDenied(now int64, req *Request) (Result, bool) {
	// The caller validated req (DenyNow's contract); apply validates again
	// what reaches the log.
	targets, statuses, err := f.targetsOf(now, req, f.scratchTargets[:0])
	defer func() { f.scratchTargets = targets[:0] }()
	if err != nil {
		return Result{}, false
	}
	if i, b := f.blockedTarget(now, targets); b != nil {
		res := f.blockedResult(now, req, targets, i, b)
		res.RLS = statuses
		return res, true
	}
	res := Result{Allowed: true, Checks: make([]CheckResult, len(targets)), RLS: statuses}
	for i := range targets {
		t := &targets[i]
		if t.shadow {
			return Result{}, false
		}
		d, _ := decideTarget(t, now)
		res.Checks[i] = CheckResult{Decision: d, PeriodNanos: t.limit.PeriodNanos, Key: t.key, Rate: t.limit.Rate}
		if !d.Allowed {
			res.Allowed = false
		}
	}
	if res.Allowed || penalized(targets, res.Checks) {
		// An admission, or a denial that counts toward a penalty: only
		// the log counts it.
		return Result{}, false
	}
	for i := range targets {
		if d := &res.Checks[i].Decision; d.Allowed {
			*d, _ = algorithms.Decide(*targets[i].limit, targets[i].state, now, 0)
		}
	}
	res.DeniedBy = f.deniedBy(targets, res.Checks, -1, nil)
	return res, true
}
