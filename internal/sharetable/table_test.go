package sharetable

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func key(cost int64) Key[string] {
	return Key[string]{Name: "k", ID: "k's name", TTL: time.Second, Most: 100, Cost: cost}
}

// TestASteadyKeyIsAnsweredFromItsShares walks one key through its life:
// the first request goes out plainly, the second asks for a share, the
// share answers until spent or ended, a renewal is asked for once half of
// it is gone, and closing gives back what is left.
func TestASteadyKeyIsAnsweredFromItsShares(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	table := New[string, string](clock.Now)
	counted := map[string]int64{}
	table.Count = func(outcome string, units int64) { counted[outcome] += units }
	ctx := context.Background()

	if got := table.Take(ctx, key(1)); got.Answered || got.Ask != 0 {
		t.Fatalf("the first request: %+v, want it sent as it is", got)
	}
	got := table.Take(ctx, key(1))
	if got.Answered || got.Ask != 4 {
		t.Fatalf("the second request: %+v, want it to ask for twice the 2 units seen", got)
	}
	sent := clock.Now()
	table.Settle("k", sent, &Grant{ID: 7, Units: 4, SpendFor: 500 * time.Millisecond}, "template")

	steps := []struct {
		name     string
		advance  time.Duration
		cost     int64
		answered bool
		left     int64
		renew    bool
	}{
		{"from the share", 10 * time.Millisecond, 1, true, 3, false},
		{"half spent: a renewal is due", 0, 1, true, 2, true},
		{"a renewal under way is not asked again", 0, 1, true, 1, false},
	}
	for _, s := range steps {
		clock.advance(s.advance)
		got := table.Take(ctx, key(s.cost))
		if got.Answered != s.answered || (got.Answered && (got.Left != s.left || got.Template != "template")) || (got.Renew > 0) != s.renew {
			t.Fatalf("%s: %+v", s.name, got)
		}
	}
	table.Settle("k", clock.Now(), &Grant{ID: 8, Units: 10, SpendFor: 500 * time.Millisecond}, "renewed")
	if got := table.Take(ctx, key(1)); !got.Answered || got.Template != "template" {
		t.Fatalf("the older share is spent first: %+v", got)
	}
	if got := table.Take(ctx, key(1)); !got.Answered || got.Template != "renewed" || got.Left != 9 {
		t.Fatalf("then the renewed one: %+v", got)
	}
	clock.advance(600 * time.Millisecond)
	if got := table.Take(ctx, key(1)); got.Answered {
		t.Fatalf("a share past its time answered: %+v", got)
	}
	if counted["expired"] != 9 || counted["spent"] != 5 || counted["granted"] != 14 {
		t.Errorf("counted %v", counted)
	}
	table.Settle("k", clock.Now(), &Grant{ID: 9, Units: 6, SpendFor: 500 * time.Millisecond}, "last")
	table.Take(ctx, key(2))
	returns := table.Close()
	if len(returns) != 1 || returns[0] != (Return[string]{Key: "k's name", ID: 9, Unspent: 4}) {
		t.Fatalf("close returned %+v", returns)
	}
	if got := table.Take(ctx, key(1)); got.Answered || got.Ask != 0 {
		t.Fatalf("a closed table answered or asked: %+v", got)
	}
}

// TestRequestsWaitForAnAskOnce: while an ask that brought a share before
// is under way, requests wait for it, and take from what it brings; they
// do not wait for an ask that brought nothing last time.
func TestRequestsWaitForAnAskOnce(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	table := New[string, string](clock.Now)
	ctx := context.Background()
	table.Take(ctx, key(1))
	table.Take(ctx, key(1)) // asks
	table.Settle("k", clock.Now(), &Grant{ID: 1, Units: 1, SpendFor: time.Second}, "a")
	if got := table.Take(ctx, key(1)); !got.Answered || got.Renew == 0 {
		t.Fatalf("spending the share: %+v, want it answered, and a renewal asked for", got)
	}
	done := make(chan Taken[string])
	go func() { done <- table.Take(ctx, key(1)) }()
	select {
	case got := <-done:
		t.Fatalf("answered %+v while an ask was under way", got)
	case <-time.After(20 * time.Millisecond):
	}
	table.Settle("k", clock.Now(), &Grant{ID: 2, Units: 5, SpendFor: time.Second}, "b")
	if got := <-done; !got.Answered || got.Template != "b" {
		t.Fatalf("the waiting request: %+v, want it answered from the new share", got)
	}
	// Asks that bring nothing (the renewal, then the ask once the share is
	// spent): the next one is not waited for.
	for {
		got := table.Take(ctx, key(1))
		if got.Renew > 0 {
			table.Settle("k", clock.Now(), nil, "")
		}
		if !got.Answered {
			break
		}
	}
	table.Settle("k", clock.Now(), nil, "")
	if got := table.Take(ctx, key(1)); got.Ask == 0 {
		t.Fatalf("%+v, want an ask", got)
	}
	ctxShort, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if got := table.Take(ctxShort, key(1)); got.Answered || got.Ask != 0 || ctxShort.Err() != nil {
		t.Fatalf("%+v (ctx %v), want it sent as it is at once", got, ctxShort.Err())
	}
}
