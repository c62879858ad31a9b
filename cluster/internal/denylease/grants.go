package denylease

import (
	"sync"
	"time"

	"github.com/limitnode/limitnode/fsm"
)

// Grants is what the leader knows of the deny leases it may have
// granted: the term it last granted one in, and when.
type Grants struct {
	mu   sync.Mutex
	term uint64
	at   time.Time
}

// Note records that results, decided in term, may have granted leases
// (a denial that says how long it holds, or a share).
func (g *Grants) Note(results []fsm.Result, term uint64) {
	for i := range results {
		if results[i].DenyForNanos > 0 || results[i].Share != nil {
			g.mu.Lock()
			g.term, g.at = term, time.Now()
			g.mu.Unlock()
			return
		}
	}
}

// RaiseWait is how long a command that gives capacity back, applied by this
// leader in term, must wait before it is acknowledged: until the last lease
// this leader granted could have ended. Leases of an earlier term (this
// node's, or another leader's before it) are not known: the first raise of
// a term waits out a whole cap.
func (g *Grants) RaiseWait(term uint64, limit time.Duration) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.term != term {
		g.term, g.at = term, time.Now()
	}
	return limit - time.Since(g.at)
}
