package main

import (
	"context"
	"testing"
	"time"
)

// alternating is a target whose every other answer is a denial and every
// third one shared.
type alternating struct {
	tally outcomeTally
}

func (a *alternating) name() string            { return "alternating" }
func (a *alternating) outcomes() *outcomeTally { return &a.tally }
func (a *alternating) do(context.Context, int, int) (int, error) {
	n := a.tally.answered.Load()
	a.tally.note(n%2 == 0, n%3 == 0)
	time.Sleep(time.Millisecond)
	return 1, nil
}

// TestMeasureReportsTheWindowsMix checks that measure reports the
// fractions of denials and shared answers of a target that counts them,
// and none for one that does not.
func TestMeasureReportsTheWindowsMix(t *testing.T) {
	t.Parallel()
	o := options{warmup: 20 * time.Millisecond, duration: 200 * time.Millisecond}
	r := measure(context.Background(), &alternating{}, loadPoint{callers: 1}, o)
	if r.DeniedFraction < 0.4 || r.DeniedFraction > 0.6 || r.SharedFraction < 0.2 || r.SharedFraction > 0.45 {
		t.Fatalf("denied %.2f, shared %.2f; want about 0.5 and 0.33", r.DeniedFraction, r.SharedFraction)
	}
	if r.mix() == "" {
		t.Fatal("the round line leaves the mix out")
	}
	if plain := (result{}); plain.mix() != "" {
		t.Fatalf("a target without a tally shows %q", plain.mix())
	}
}
