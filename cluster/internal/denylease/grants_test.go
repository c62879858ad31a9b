package denylease

import (
	"testing"
	"time"

	"github.com/limitnode/limitnode/fsm"
)

// TestARaiseWaitsForWhatWasGrantedAndWhatIsBeingDecided: a raise waits
// out the cap from the last grant of its term; a grant of an earlier term
// is unknown (a whole cap); and while a decision off the log is under way
// (Deciding, before it reads the state), the raise counts it as granting
// now, whatever it turns out to grant.
func TestARaiseWaitsForWhatWasGrantedAndWhatIsBeingDecided(t *testing.T) {
	t.Parallel()
	const limit = time.Hour // so that the test's own time does not count
	denial := []fsm.Result{{DenyForNanos: int64(time.Second)}}
	admission := []fsm.Result{{Allowed: true}}
	tests := []struct {
		name    string
		steps   func(g *Grants)
		atLeast time.Duration // of the wait the raise is told
		atMost  time.Duration
	}{
		{"nothing granted in its term: a whole cap", func(g *Grants) { g.Granted(1) }, limit - time.Minute, limit},
		{"granted in its term long ago", func(g *Grants) {
			g.Granted(2)
			g.mu.Lock()
			g.at = g.at.Add(-limit)
			g.mu.Unlock()
		}, -time.Hour, 0},
		{"a fast denial under way", func(g *Grants) {
			g.Granted(2)
			g.mu.Lock()
			g.at = g.at.Add(-limit)
			g.mu.Unlock()
			g.Deciding()
		}, limit - time.Minute, limit},
		{"a fast denial decided, granting", func(g *Grants) {
			g.Granted(2)
			g.mu.Lock()
			g.at = g.at.Add(-limit)
			g.mu.Unlock()
			g.Deciding()
			g.Decided(denial, 2)
		}, limit - time.Minute, limit},
		{"a fast decision that granted nothing", func(g *Grants) {
			g.Granted(2)
			g.mu.Lock()
			g.at = g.at.Add(-limit)
			g.mu.Unlock()
			g.Deciding()
			g.Decided(admission, 2)
		}, -time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var g Grants
			tt.steps(&g)
			if got := g.RaiseWait(2, limit); got < tt.atLeast || got > tt.atMost {
				t.Fatalf("a raise in term 2 waits %v, want %v to %v", got, tt.atLeast, tt.atMost)
			}
		})
	}
}
