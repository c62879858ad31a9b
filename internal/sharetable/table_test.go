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

// timers makes table set its timers on the fake clock: it keeps them, and
// returns a function that runs those due.
func (c *fakeClock) timers(table *Table[string, string]) (runDue func()) {
	type timer struct {
		at time.Time
		f  func()
	}
	var mu sync.Mutex
	var set []timer
	table.afterFunc = func(d time.Duration, f func()) {
		mu.Lock()
		set = append(set, timer{c.Now().Add(d), f})
		mu.Unlock()
	}
	return func() {
		mu.Lock()
		var due []func()
		kept := set[:0]
		for _, tm := range set {
			if tm.at.After(c.Now()) {
				kept = append(kept, tm)
			} else {
				due = append(due, tm.f)
			}
		}
		set = kept
		mu.Unlock()
		for _, f := range due {
			f()
		}
	}
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
	clock.timers(table)
	var mu sync.Mutex
	counted := map[string]int64{}
	table.Count = func(outcome string, units int64) {
		mu.Lock()
		counted[outcome] += units
		mu.Unlock()
	}
	given := make(chan []Return[string], 1)
	table.GiveBack = func(r []Return[string]) { given <- r }
	ctx := context.Background()

	if got := table.Take(ctx, key(1)); got.Answered || got.Ask != 0 {
		t.Fatalf("the first request: %+v, want it sent as it is", got)
	}
	got := table.Take(ctx, key(1))
	if got.Answered || got.Ask != 4 {
		t.Fatalf("the second request: %+v, want it to ask for twice the 2 units seen", got)
	}
	sent := clock.Now()
	table.Settle("k", sent, &Grant{Token: "7", Units: 4, SpendFor: 500 * time.Millisecond}, "template")

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
	table.Settle("k", clock.Now(), &Grant{Token: "8", Units: 10, SpendFor: 500 * time.Millisecond}, "renewed")
	if got := <-given; len(got) != 1 || got[0] != (Return[string]{Key: "k's name", Token: "7", Unspent: 1}) {
		t.Fatalf("the renewal gave back %+v, want the 1 unit left of the older share", got)
	}
	for _, left := range []int64{9, 8} {
		if got := table.Take(ctx, key(1)); !got.Answered || got.Template != "renewed" || got.Left != left {
			t.Fatalf("the renewed share answers: %+v, want %d left", got, left)
		}
	}
	clock.advance(400 * time.Millisecond)
	if got := table.Take(ctx, key(1)); got.Answered {
		t.Fatalf("a share with a quarter of its time left answered: %+v", got)
	}
	if got := <-given; len(got) != 1 || got[0] != (Return[string]{Key: "k's name", Token: "8", Unspent: 8}) {
		t.Fatalf("retiring the share gave back %+v, want its 8 units", got)
	}
	if counted["expired"] != 0 || counted["spent"] != 5 || counted["returned"] != 9 || counted["granted"] != 14 {
		t.Errorf("counted %v", counted)
	}
	table.Settle("k", clock.Now(), &Grant{Token: "9", Units: 6, SpendFor: 500 * time.Millisecond}, "last")
	table.Take(ctx, key(2))
	returns := table.Close()
	if len(returns) != 1 || returns[0] != (Return[string]{Key: "k's name", Token: "9", Unspent: 4}) {
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
	table.Settle("k", clock.Now(), &Grant{Token: "1", Units: 1, SpendFor: time.Second}, "a")
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
	table.Settle("k", clock.Now(), &Grant{Token: "2", Units: 5, SpendFor: time.Second}, "b")
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

// TestAnIdleKeysShareIsGivenBackWhileItLasts: a share whose key goes quiet
// is retired by its timer with a quarter of its time left, and what is
// left of it given back; a table without GiveBack spends it to its end.
func TestAnIdleKeysShareIsGivenBackWhileItLasts(t *testing.T) {
	for _, giving := range []bool{true, false} {
		clock := &fakeClock{now: time.Unix(1000, 0)}
		table := New[string, string](clock.Now)
		runDue := clock.timers(table)
		counted := map[string]int64{}
		table.Count = func(outcome string, units int64) { counted[outcome] += units }
		given := make(chan []Return[string], 1)
		if giving {
			table.GiveBack = func(r []Return[string]) { given <- r }
		}
		ctx := context.Background()
		table.Take(ctx, key(1))
		table.Take(ctx, key(1))
		table.Settle("k", clock.Now(), &Grant{Token: "1", Units: 10, SpendFor: 400 * time.Millisecond}, "a")
		table.Take(ctx, key(3))
		clock.advance(299 * time.Millisecond)
		runDue()
		got := table.Take(ctx, key(1))
		if !got.Answered || got.Left != 6 || got.Renew == 0 {
			t.Fatalf("giving back %v: before its time to retire: %+v, want it answered with 6 left, and a renewal", giving, got)
		}
		table.Settle("k", clock.Now(), nil, "") // the renewal brought nothing
		clock.advance(time.Millisecond)
		runDue()
		if !giving {
			if got := table.Take(ctx, key(1)); !got.Answered || got.Left != 5 {
				t.Fatalf("without GiveBack, past its time to retire: %+v, want it answered with 5 left", got)
			}
			clock.advance(100 * time.Millisecond)
			if got := table.Take(ctx, key(1)); got.Answered || counted["expired"] != 5 {
				t.Fatalf("without GiveBack, at its end: %+v, counted %v; want the 5 left expired", got, counted)
			}
			continue
		}
		if got := <-given; len(got) != 1 || got[0] != (Return[string]{Key: "k's name", Token: "1", Unspent: 6}) {
			t.Fatalf("retired %+v, want the 6 units left", got)
		}
		if got := table.Take(ctx, key(1)); got.Answered {
			t.Fatalf("a retired share answered: %+v", got)
		}
		if returns := table.Close(); len(returns) != 0 {
			t.Fatalf("close gave back %+v again", returns)
		}
	}
}

// TestAClosedTableTakesNothing: Close waits for the give-backs under way;
// after it no key asks for a share, an old one or one first seen after;
// a share asked before Close and granted after is given back whole.
func TestAClosedTableTakesNothing(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	table := New[string, string](clock.Now)
	clock.timers(table)
	release := make(chan struct{})
	given := make(chan []Return[string], 2)
	table.GiveBack = func(r []Return[string]) {
		<-release
		given <- r
	}
	ctx := context.Background()
	table.Take(ctx, key(1))
	table.Take(ctx, key(1)) // asks
	table.Settle("k", clock.Now(), &Grant{Token: "a", Units: 4, SpendFor: time.Second}, "a")
	if got := table.Take(ctx, key(3)); !got.Answered || got.Renew == 0 {
		t.Fatalf("%+v, want it answered and a renewal asked for", got)
	}
	table.Settle("k", clock.Now(), &Grant{Token: "b", Units: 4, SpendFor: time.Second}, "b") // retires a, its give-back held
	if got := table.Take(ctx, key(3)); !got.Answered || got.Renew == 0 {
		t.Fatalf("%+v, want it answered and a renewal asked for", got)
	}
	closed := make(chan []Return[string])
	go func() { closed <- table.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a give-back was under way")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if got := <-given; len(got) != 1 || got[0] != (Return[string]{Key: "k's name", Token: "a", Unspent: 1}) {
		t.Fatalf("the retired share: %+v", got)
	}
	if returns := <-closed; len(returns) != 1 || returns[0] != (Return[string]{Key: "k's name", Token: "b", Unspent: 1}) {
		t.Fatalf("Close returned %+v, want b's 1 unit left", returns)
	}
	table.Settle("k", clock.Now(), &Grant{Token: "late", Units: 6, SpendFor: time.Second}, "late") // the renewal, answered after Close
	if got := <-given; len(got) != 1 || got[0] != (Return[string]{Key: "k's name", Token: "late", Unspent: 6}) {
		t.Fatalf("the share granted after Close: %+v, want it given back whole", got)
	}
	other := Key[string]{Name: "new", ID: "new's name", TTL: time.Second, Most: 100, Cost: 1}
	for range 3 {
		for _, k := range []Key[string]{key(1), other} {
			if got := table.Take(ctx, k); got.Answered || got.Ask != 0 || got.Renew != 0 {
				t.Fatalf("after Close, %s: %+v, want it sent as it is", k.Name, got)
			}
		}
	}
}
