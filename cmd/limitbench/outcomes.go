package main

import (
	"fmt"
	"sync/atomic"
	"time"
)

// outcomeTally counts how a target's answers were decided, for the targets
// whose mix matters to their figure (how many were denied, how many came
// from a local share): measure reports the fractions of the measured window.
type outcomeTally struct {
	answered, denied, shared atomic.Int64
}

// note counts one answer.
func (o *outcomeTally) note(denied, shared bool) {
	o.answered.Add(1)
	if denied {
		o.denied.Add(1)
	}
	if shared {
		o.shared.Add(1)
	}
}

type outcomeCounts struct{ answered, denied, shared int64 }

func (o *outcomeTally) read() outcomeCounts {
	return outcomeCounts{o.answered.Load(), o.denied.Load(), o.shared.Load()}
}

// tallied is a target that counts its outcomes.
type tallied interface{ outcomes() *outcomeTally }

// watchOutcomes reads tgt's tally when the measured window opens, and
// returns a function that, once the run is over, puts the window's
// fractions into r. For a target without a tally it does nothing.
func watchOutcomes(tgt target, from time.Time) func(r *result) {
	t, ok := tgt.(tallied)
	if !ok {
		return func(*result) {}
	}
	opened := make(chan outcomeCounts, 1)
	go func() {
		time.Sleep(time.Until(from))
		opened <- t.outcomes().read()
	}()
	return func(r *result) {
		start, end := <-opened, t.outcomes().read()
		if n := end.answered - start.answered; n > 0 {
			r.DeniedFraction = float64(end.denied-start.denied) / float64(n)
			r.SharedFraction = float64(end.shared-start.shared) / float64(n)
		}
	}
}

// mix is the round line's note of the fractions, if the target counts them.
func (r result) mix() string {
	if r.DeniedFraction == 0 && r.SharedFraction == 0 {
		return ""
	}
	return fmt.Sprintf("  denied %.1f%%  shared %.1f%%", 100*r.DeniedFraction, 100*r.SharedFraction)
}
