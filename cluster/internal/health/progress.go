package health

import (
	"fmt"
	"sync"
	"time"
)

// maxReadyLag bounds how far behind the leader a member may be and still
// say it is ready: it must have applied, by now, what the leader had
// applied this long ago. A sound follower applies within milliseconds of
// the leader, even under load; one that cannot append, or applies too
// slowly to keep up, falls behind for good, and its reads would be stale.
const maxReadyLag = 10 * time.Second

// keptProgress is how many of the leader's pings a member remembers: one a
// second (Every), for somewhat longer than maxReadyLag.
const keptProgress = 32

// Progress is what the leader's pings told a member of the leader's
// applied index, and when (by the member's monotonic clock).
type Progress struct {
	mu      sync.Mutex
	samples []progressSample // oldest first
}

type progressSample struct {
	index uint64
	at    time.Time
}

// Note records that the leader had applied index at at.
func (p *Progress) Note(index uint64, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, progressSample{index, at})
	if len(p.samples) > keptProgress {
		p.samples = p.samples[len(p.samples)-keptProgress:]
	}
}

// Clear forgets the leader's progress (this node leads now).
func (p *Progress) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = nil
}

// owed returns what the leader had applied at least within ago, the latest
// such sample, and whether there is one.
func (p *Progress) owed(within time.Duration) (progressSample, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cutoff := time.Now().Add(-within)
	for i := len(p.samples) - 1; i >= 0; i-- {
		if !p.samples[i].at.After(cutoff) {
			return p.samples[i], true
		}
	}
	return progressSample{}, false
}

// Trailing says how a follower that has applied the log up to applied
// trails the leader, or "" when it keeps up (or has not known the leader
// for maxReadyLag yet).
func (p *Progress) Trailing(applied uint64) string {
	owed, ok := p.owed(maxReadyLag)
	if ok && applied < owed.index {
		return fmt.Sprintf("this node trails the leader: it has applied the log up to %d, while the leader had applied %d %s ago (can it write to its disk?)",
			applied, owed.index, time.Since(owed.at).Round(time.Second))
	}
	return ""
}
