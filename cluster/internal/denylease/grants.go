package denylease

import (
	"sync"
	"time"

	"github.com/limitnode/limitnode/fsm"
)

// Grants is what the leader knows of the deny leases (and shares) it may
// have granted: the term it last granted one in, and when, and how many
// decisions that may grant one are under way.
//
// A raise must see every grant decided before it. A grant in the log is
// noted as it is applied (Granted, from fsm.FSM.OnLocalAnswers), before
// any later entry is; a fast denial, decided off the log on the applied
// state, is bracketed by Deciding and Decided around its reading of the
// state, so that a raise applied meanwhile waits a whole cap.
type Grants struct {
	mu       sync.Mutex
	term     uint64
	at       time.Time
	deciding int
}

// Granted records that a lease or a share may have been granted now, in
// term.
func (g *Grants) Granted(term uint64) {
	g.mu.Lock()
	g.term, g.at = term, time.Now()
	g.mu.Unlock()
}

// Deciding marks a decision off the log under way: until Decided, a raise
// counts it as granting now.
func (g *Grants) Deciding() {
	g.mu.Lock()
	g.deciding++
	g.mu.Unlock()
}

// Decided ends a decision that Deciding marked, noting a grant if results,
// decided in term, may have granted one.
func (g *Grants) Decided(results []fsm.Result, term uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deciding--
	for i := range results {
		if results[i].GrantsLocalAnswers() {
			g.term, g.at = term, time.Now()
			return
		}
	}
}

// RaiseWait is how long a command that gives capacity back, applied by this
// leader in term, must wait before it is acknowledged: until the last lease
// this leader granted could have ended. Leases of an earlier term (this
// node's, or another leader's before it) are not known: the first raise of
// a term waits out a whole cap, as does one while a decision off the log
// is under way.
func (g *Grants) RaiseWait(term uint64, limit time.Duration) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.term != term || g.deciding > 0 {
		g.term, g.at = term, time.Now()
	}
	return limit - time.Since(g.at)
}
