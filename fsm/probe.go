package fsm

import (
	"time"
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
			d.RetryAfter, d.ResetAfter, d.RefillAfter = l.RetryAfter, l.ResetAfter, l.RefillAfter
		}
		res.DenyAtNanos, res.DenyForNanos = clock, denyFor(req, res.Checks)
	case clock-at <= int64(QueuedStaleness) && queued():
		res = res.WaitsShortenedBy(time.Duration(clock - at))
	default:
		return Result{}, false
	}
	res.AtNanos = at
	return res, true
}

// probeDenied decides req at now without changing anything (evaluate,
// onlyTell), and reports whether it is a denial the leader may give without
// the log: denied, with no check in shadow mode (a shadow check's denial is
// counted in the state) and not counting toward a penalty.
func (f *FSM) probeDenied(now int64, req *Request) (Result, bool) {
	// The caller validated req (DenyNow's contract); apply validates again
	// what reaches the log.
	res, penalizing := f.evaluate(now, req, &AllowCommand{}, onlyTell)
	if res.Allowed || res.Rejection != nil || penalizing {
		return Result{}, false
	}
	for i := range res.Checks {
		if res.Checks[i].Shadow {
			return Result{}, false
		}
	}
	if res.Blocked == nil {
		res.DenyAtNanos, res.DenyForNanos = 0, 0 // DenyNow says how long it holds, from its clock
	}
	return res, true
}
