// Package fastdeny holds what a leader's fast denials know beside the
// replicated state: which kinds of request were denied lately (Recent), so
// that only those pay for a first look at the state, and which keys have
// requests on their way to the log (Queued), so that a unit refilled by the
// clock goes to the request already queued for it.
package fastdeny

import (
	"sync"
	"time"

	"github.com/limitnode/limitnode/fsm"
)

// Recent remembers what this node saw denied or spent to the last
// unit lately (each check's key and limit, or each descriptor of an Envoy
// query), so that the first look of the fast path, which costs about what
// deciding does, is spent only on requests that may be denied: under a load
// that is never over its limits, no request pays for it.
type Recent struct {
	mu sync.Mutex
	at map[string]time.Time
}

// Bounds of Recent: what "lately" is, and how many parts it keeps
// (past that, it forgets the oldest, and those requests go to the log
// until they are denied again).
const (
	recentDenialWindow = 2 * time.Second
	maxRecentDenials   = 1 << 16
)

// Note records the parts of the requests that results deny, or admit with
// nothing left under a check (the next request will likely be denied).
func (r *Recent) Note(reqs []fsm.Request, results []fsm.Result) {
	var now time.Time
	for i := range results {
		res := &results[i]
		if res.Rejection != nil || i >= len(reqs) || (res.Allowed && !res.TookTheLast()) {
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		r.mu.Lock()
		if r.at == nil {
			r.at = make(map[string]time.Time)
		}
		for _, part := range requestParts(&reqs[i]) {
			if len(r.at) >= maxRecentDenials {
				r.forgetOld(now)
			}
			r.at[part] = now
		}
		r.mu.Unlock()
	}
}

// forgetOld drops the parts not seen within the window, or half of them
// when all are recent.
func (r *Recent) forgetOld(now time.Time) {
	for key, at := range r.at {
		if now.Sub(at) > recentDenialWindow || len(r.at) >= maxRecentDenials/2 {
			delete(r.at, key)
		}
	}
}

// AnyRecent reports whether a request of reqs has a part seen lately.
func (r *Recent) AnyRecent(reqs []fsm.Request) bool {
	r.mu.Lock()
	empty := len(r.at) == 0
	r.mu.Unlock()
	if empty {
		return false
	}
	var parts []string
	for i := range reqs {
		parts = append(parts, requestParts(&reqs[i])...)
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, part := range parts {
		if at, ok := r.at[part]; ok && now.Sub(at) <= recentDenialWindow {
			return true
		}
	}
	return false
}

// requestParts names what each check of a request counts on (its policy,
// key, inline limit and dimensions), or each descriptor of its query.
func requestParts(r *fsm.Request) []string {
	var out []string
	if q := r.RLS; q != nil {
		for i := range q.Descriptors {
			out = append(out, fsm.DescriptorCountsOn(q.Domain, &q.Descriptors[i]))
		}
		return out
	}
	for _, c := range r.Checks {
		out = append(out, c.CountsOn())
	}
	return out
}

// Queued counts the requests on their way to the log by key. When a
// token refills, every request that sees it would otherwise go to the log,
// where one takes it and the rest are denied an entry later; with the
// count, the first goes and the others are denied at the applied time
// meanwhile (fsm.DenyNow's queued), still linearizably.
type Queued struct {
	mu sync.Mutex
	n  map[string]int
}

// Add counts delta more requests on the keys of reqs.
func (q *Queued) Add(reqs []fsm.Request, delta int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == nil {
		q.n = make(map[string]int)
	}
	for i := range reqs {
		k := reqs[i].CountsOn()
		if q.n[k] += delta; q.n[k] <= 0 {
			delete(q.n, k)
		}
	}
}

// Has reports whether a request on r's key is on its way to the log.
func (q *Queued) Has(r *fsm.Request) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n[r.CountsOn()] > 0
}
