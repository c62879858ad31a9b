package fsm

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
	"pgregory.net/rapid"
)

const sec = int64(time.Second)

// waitFor is acquire with a wait of 5 s in a queue of at most 3.
func waitFor(id string, now int64) LeaseCommand {
	cmd := acquire(id, now)
	cmd.MaxWaitNanos, cmd.MaxQueue = 5*sec, 3
	return cmd
}

// recordEvents collects the FSM's lease events.
func recordEvents(a *applier) *[]LeaseEvent {
	var got []LeaseEvent
	a.fsm.OnLeaseEvents(func(ev LeaseEvent) { got = append(got, ev) }, func() {})
	return &got
}

func (a *applier) tick(now int64) {
	a.t.Helper()
	data, err := Encode(CommandLeaseTick, &LeaseTickCommand{NowNanos: now})
	if err != nil {
		a.t.Fatal(err)
	}
	if _, ok := a.raw(data).(*LeaseResult); !ok {
		a.t.Fatal("a tick did not apply")
	}
}

func TestLeaseQueueGrantsInArrivalOrder(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	events := recordEvents(a)
	a.lease(CommandAcquireLease, acquire("a", t0))
	a.lease(CommandAcquireLease, acquire("b", t0+sec))
	for i, id := range []string{"c", "d", "e"} {
		r := a.lease(CommandAcquireLease, waitFor(id, t0+2*sec))
		if !r.Queued || r.Granted || r.Position != int64(i+1) || r.Waiting != int64(i+1) || r.DeadlineNanos != t0+7*sec {
			t.Fatalf("%s: %+v", id, r)
		}
	}
	// The queue holds 3: a fourth is refused at once, with the time until
	// the earliest lease expires.
	if r := a.lease(CommandAcquireLease, waitFor("f", t0+2*sec)); r.Queued || r.Granted || r.Waiting != 3 || r.RetryAfterNanos != 8*sec {
		t.Fatalf("f: %+v", r)
	}
	// A retried acquire keeps its place.
	if r := a.lease(CommandAcquireLease, waitFor("d", t0+3*sec)); !r.Queued || r.Position != 2 || r.WaitedNanos != sec {
		t.Fatalf("d again: %+v", r)
	}
	if len(*events) != 0 {
		t.Fatalf("events before any slot freed: %+v", *events)
	}
	// Giving a back grants c, the first waiter, in the same entry, until
	// its node claims it: LeaseClaimWindow (5 s) rather than its TTL.
	if r := a.lease(CommandReleaseLease, LeaseCommand{NowNanos: t0 + 4*sec, ID: "a"}); !r.Released || r.Active != 2 || r.Waiting != 2 {
		t.Fatalf("release a: %+v", r)
	}
	want := LeaseEvent{ID: "c", Result: LeaseResult{Granted: true, Active: 2, Waiting: 2, ExpiresAtNanos: t0 + 9*sec, WaitedNanos: 2 * sec, AtNanos: t0 + 4*sec, GrantedAtNanos: t0 + 4*sec}}
	if len(*events) != 1 || (*events)[0] != want {
		t.Fatalf("events after releasing a: %+v", *events)
	}
	// Withdrawing d takes it out; e moves up.
	if r := a.lease(CommandReleaseLease, LeaseCommand{NowNanos: t0 + 5*sec, ID: "d"}); !r.Withdrawn || r.Waiting != 1 {
		t.Fatalf("withdraw d: %+v", r)
	}
	if ev := (*events)[1]; ev.ID != "d" || !ev.Result.Withdrawn || ev.Result.Granted {
		t.Fatalf("withdrawal event: %+v", ev)
	}
	if _, _, queued := a.fsm.Leases("reports", 0); len(queued) != 1 || queued[0].ID != "e" || queued[0].Position != 1 {
		t.Fatalf("queue after withdrawing d: %+v", queued)
	}
	// e's deadline, t0+7s, passes before c's unclaimed lease (t0+9s) or b
	// (t0+11s) expires: a tick at the deadline takes it out without a
	// slot, 2 s before the earliest expiry.
	a.tick(t0 + 7*sec - 1)
	if len(*events) != 2 {
		t.Fatalf("e left before its deadline: %+v", *events)
	}
	a.tick(t0 + 7*sec)
	if ev := (*events)[2]; ev.ID != "e" || ev.Result.Granted || ev.Result.Withdrawn || ev.Result.WaitedNanos != 5*sec || ev.Result.RetryAfterNanos != 2*sec {
		t.Fatalf("timeout event: %+v", ev)
	}
	if due, ok := a.fsm.NextLeaseDue(); ok {
		t.Fatalf("nobody waits, yet a due time %d", due)
	}
}

func TestLeaseQueueGrantsAtExpiry(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	events := recordEvents(a)
	a.lease(CommandAcquireLease, acquire("a", t0))
	a.lease(CommandAcquireLease, acquire("b", t0))
	a.lease(CommandAcquireLease, waitFor("c", t0+sec))
	// a and b expire at t0+10s, after c's deadline (t0+6s): the queue is
	// due at the deadline.
	if due, ok := a.fsm.NextLeaseDue(); !ok || due != t0+6*sec {
		t.Fatalf("due %d %v", due, ok)
	}
	a.lease(CommandReleaseLease, LeaseCommand{NowNanos: t0 + 2*sec, ID: "c"})
	cmd := waitFor("d", t0+8*sec)
	cmd.MaxWaitNanos = 5 * sec
	a.lease(CommandAcquireLease, cmd)
	if due, _ := a.fsm.NextLeaseDue(); due != t0+10*sec {
		t.Fatalf("due %d, want the expiry", due)
	}
	// Any stamped entry that brings the time past an expiry grants: here
	// an allow batch.
	a.allow(t0+10*sec, one("other", perMinute100, 1))
	last := (*events)[len(*events)-1]
	if last.ID != "d" || !last.Result.Granted || last.Result.ExpiresAtNanos != t0+15*sec || last.Result.Active != 1 {
		t.Fatalf("events: %+v", *events)
	}
}

func TestLeaseQueueRejections(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.lease(CommandAcquireLease, acquire("a", t0))
	a.lease(CommandAcquireLease, acquire("b", t0))
	a.lease(CommandAcquireLease, waitFor("w", t0))
	other := waitFor("w", t0)
	other.Key = "elsewhere"
	bad := []struct {
		name  string
		cmd   LeaseCommand
		field string
	}{
		{"max_wait over its maximum", LeaseCommand{NowNanos: t0, ID: "x", Key: "k", Max: 1, TTLNanos: sec, MaxWaitNanos: int64(11 * time.Minute), MaxQueue: 1}, "max_wait"},
		{"a negative max_wait", LeaseCommand{NowNanos: t0, ID: "x", Key: "k", Max: 1, TTLNanos: sec, MaxWaitNanos: -1, MaxQueue: 1}, "max_wait"},
		{"max_wait without max_queue", LeaseCommand{NowNanos: t0, ID: "x", Key: "k", Max: 1, TTLNanos: sec, MaxWaitNanos: sec}, "max_queue"},
		{"max_queue over its maximum", LeaseCommand{NowNanos: t0, ID: "x", Key: "k", Max: 1, TTLNanos: sec, MaxWaitNanos: sec, MaxQueue: 10_001}, "max_queue"},
		{"max_queue without max_wait", LeaseCommand{NowNanos: t0, ID: "x", Key: "k", Max: 1, TTLNanos: sec, MaxQueue: 1}, "max_queue"},
		{"a waiting ID for another key", other, "id"},
	}
	for _, tt := range bad {
		if r := a.lease(CommandAcquireLease, tt.cmd); r.Rejection == nil || r.Rejection.Field != tt.field || r.Granted || r.Queued {
			t.Errorf("%s: %+v", tt.name, r)
		}
	}
	if _, _, queued := a.fsm.Leases("reports", 0); len(queued) != 1 {
		t.Fatalf("a rejection changed the queue: %+v", queued)
	}
}

func TestLeaseQueueSurvivesSnapshots(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.lease(CommandAcquireLease, acquire("a", t0))
	a.lease(CommandAcquireLease, acquire("b", t0))
	for _, id := range []string{"z", "y", "x"} { // IDs against arrival order
		a.lease(CommandAcquireLease, waitFor(id, t0))
	}
	snap := mustSnapshot(t, a.fsm)
	b := newApplier(t)
	restored := 0
	b.fsm.OnLeaseEvents(func(LeaseEvent) {}, func() { restored++ })
	if err := b.fsm.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if restored != 1 {
		t.Fatalf("the restore hook ran %d times", restored)
	}
	if !bytes.Equal(snap, mustSnapshot(t, b.fsm)) {
		t.Fatal("the restored queue snapshots differently")
	}
	events := recordEvents(b)
	b.lease(CommandReleaseLease, LeaseCommand{NowNanos: t0 + 1, ID: "a"})
	if len(*events) != 1 || (*events)[0].ID != "z" || !(*events)[0].Result.Granted {
		t.Fatalf("after restore the first waiter is not first: %+v", *events)
	}
	if r := b.fsm.LeaseOf("y"); !r.Queued || r.Position != 1 {
		t.Fatalf("LeaseOf(y): %+v", r)
	}
}

// queueModel is the lease queue as plainly as it can be said: per group,
// the holders and the waiters in arrival order.
type queueModel struct {
	now     int64
	holders map[string][]modelLease // by key (one max per key here)
	waiters map[string][]modelWaiter
	events  []LeaseEvent
}

type modelLease struct {
	id                string
	expiresAt         int64
	grantedAt, waited int64
	claimTTL          int64 // the TTL its claim gives it from its grant; 0: nothing to claim
}

type modelWaiter struct {
	id                      string
	ttl, enqueued, deadline int64
}

func (m *queueModel) retryAfter(key string) int64 {
	if len(m.holders[key]) == 0 {
		return 0
	}
	earliest := slices.MinFunc(m.holders[key], func(a, b modelLease) int { return cmp.Compare(a.expiresAt, b.expiresAt) })
	return max(earliest.expiresAt-m.now, 1)
}

func (m *queueModel) leave(key string, i int, withdrawn bool) {
	w := m.waiters[key][i]
	m.waiters[key] = slices.Delete(m.waiters[key], i, i+1)
	m.events = append(m.events, LeaseEvent{ID: w.id, Result: LeaseResult{Withdrawn: withdrawn, Active: int64(len(m.holders[key])),
		Waiting: int64(len(m.waiters[key])), RetryAfterNanos: m.retryAfter(key), WaitedNanos: m.now - w.enqueued, AtNanos: m.now}})
}

// grant gives key's free slots, now, to its first waiters still waiting.
func (m *queueModel) grant(key string, maxHolders int64) {
	for len(m.waiters[key]) > 0 && int64(len(m.holders[key])) < maxHolders {
		w := m.waiters[key][0]
		if w.deadline <= m.now {
			m.leave(key, 0, false)
			continue
		}
		m.waiters[key] = m.waiters[key][1:]
		l := modelLease{id: w.id, expiresAt: m.now + min(w.ttl, int64(LeaseClaimWindow)), grantedAt: m.now, waited: m.now - w.enqueued} // until its node claims it
		if w.ttl > int64(LeaseClaimWindow) {
			l.claimTTL = w.ttl
		}
		m.holders[key] = append(m.holders[key], l)
		m.events = append(m.events, LeaseEvent{ID: w.id, Result: LeaseResult{Granted: true, Active: int64(len(m.holders[key])),
			Waiting: int64(len(m.waiters[key])), ExpiresAtNanos: l.expiresAt, WaitedNanos: l.waited, AtNanos: m.now, GrantedAtNanos: m.now}})
	}
}

// advance moves time on: every waiter whose deadline has come leaves
// without a slot, every lease that has expired goes, and the slots free
// then go to the waiters left, at the new time.
func (m *queueModel) advance(now int64, maxHolders int64, keys []string) {
	m.now = max(m.now, now)
	type due struct {
		at  int64
		key string
		id  string
	}
	var departures []due
	for _, k := range keys {
		for _, w := range m.waiters[k] {
			if w.deadline <= m.now {
				departures = append(departures, due{w.deadline, k, w.id})
			}
		}
	}
	slices.SortFunc(departures, func(a, b due) int { return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.id, b.id)) })
	for _, d := range departures {
		m.leave(d.key, slices.IndexFunc(m.waiters[d.key], func(x modelWaiter) bool { return x.id == d.id }), false)
	}
	for _, k := range keys {
		m.holders[k] = slices.DeleteFunc(m.holders[k], func(l modelLease) bool { return l.expiresAt <= m.now })
		m.grant(k, maxHolders)
	}
}

// claim applies a claim of id to the model: a held lease with a claim
// pending runs its TTL from its grant.
func (m *queueModel) claim(id string) (modelLease, bool) {
	for _, k := range slices.Sorted(maps.Keys(m.holders)) {
		if i := slices.IndexFunc(m.holders[k], func(l modelLease) bool { return l.id == id }); i >= 0 {
			l := &m.holders[k][i]
			if l.claimTTL > 0 {
				l.expiresAt, l.claimTTL = l.grantedAt+l.claimTTL, 0
			}
			return *l, true
		}
	}
	return modelLease{}, false
}

// TestLeaseQueueMatchesModel drives the FSM and the model with the same
// random commands: the same answers, the same grants and departures, and
// never more holders than the maximum or a waiter past its deadline.
func TestLeaseQueueMatchesModel(t *testing.T) {
	t.Parallel()
	keys := []string{"k0", "k1"}
	const maxHolders = 2
	rapid.Check(t, func(rt *rapid.T) {
		a := newApplier(t)
		var got []LeaseEvent
		a.fsm.OnLeaseEvents(func(ev LeaseEvent) { got = append(got, ev) }, func() {})
		m := &queueModel{now: t0, holders: map[string][]modelLease{}, waiters: map[string][]modelWaiter{}}
		ids := []string{}
		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			now := m.now + rapid.Int64Range(0, 4*sec).Draw(rt, "dt")
			m.events = nil
			got = got[:0]
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0: // acquire, maybe waiting
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				id := fmt.Sprintf("r%d", step)
				if len(ids) > 0 && rapid.IntRange(0, 4).Draw(rt, "retry") == 0 {
					id = rapid.SampledFrom(ids).Draw(rt, "id")
				}
				cmd := LeaseCommand{NowNanos: now, ID: id, Key: key, Max: maxHolders, TTLNanos: rapid.Int64Range(1, 8).Draw(rt, "ttl") * sec}
				if rapid.Bool().Draw(rt, "wait") {
					cmd.MaxWaitNanos = rapid.Int64Range(1, 8).Draw(rt, "maxWait") * sec
					cmd.MaxQueue = rapid.Int64Range(1, 3).Draw(rt, "maxQueue")
				}
				r := a.lease(CommandAcquireLease, cmd)
				m.advance(now, maxHolders, keys)
				checkAcquire(rt, m, &cmd, r)
				ids = append(ids, id)
			case 1: // release or withdraw (maybe a waiter only)
				if len(ids) == 0 {
					continue
				}
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				waiterOnly := rapid.Bool().Draw(rt, "waiterOnly")
				r := a.lease(CommandReleaseLease, LeaseCommand{NowNanos: now, ID: id, WaiterOnly: waiterOnly})
				m.advance(now, maxHolders, keys)
				checkRelease(rt, m, id, waiterOnly, maxHolders, r)
			case 2:
				a.tick(now)
				m.advance(now, maxHolders, keys)
			case 3: // a claim, by the node where a request waited
				if len(ids) == 0 {
					continue
				}
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				r := a.lease(CommandRenewLease, LeaseCommand{NowNanos: now, ID: id, TTLNanos: sec, AnyOwner: true, Claim: true})
				m.advance(now, maxHolders, keys)
				l, held := m.claim(id)
				if held != r.Granted || (held && (r.ExpiresAtNanos != l.expiresAt || r.GrantedAtNanos != l.grantedAt || r.WaitedNanos != l.waited)) {
					rt.Fatalf("claim of %s: %+v, model %+v (held %v)", id, r, l, held)
				}
			}
			sortEvents := func(ev []LeaseEvent) {
				slices.SortFunc(ev, func(x, y LeaseEvent) int { return strings.Compare(x.ID, y.ID) })
			}
			sortEvents(got)
			sortEvents(m.events)
			if !slices.Equal(got, m.events) {
				rt.Fatalf("step %d events:\n got  %+v\n want %+v", step, got, m.events)
			}
			for _, ev := range got {
				if ev.Result.Granted && (ev.Result.WaitedNanos < 0 || ev.Result.WaitedNanos >= 8*sec) {
					rt.Fatalf("step %d: a waiter granted after waiting %d, beyond every max_wait drawn: %+v", step, ev.Result.WaitedNanos, ev)
				}
			}
			for _, k := range keys {
				_, held, queued := a.fsm.Leases(k, 0)
				if len(held) != len(m.holders[k]) || len(held) > maxHolders {
					rt.Fatalf("%s holders: %+v, model %+v", k, held, m.holders[k])
				}
				if len(queued) != len(m.waiters[k]) {
					rt.Fatalf("%s queue: %+v, model %+v", k, queued, m.waiters[k])
				}
				for i, q := range queued {
					if q.ID != m.waiters[k][i].id || q.DeadlineNanos <= m.now || q.Position != int64(i+1) {
						rt.Fatalf("%s queue: %+v, model %+v", k, queued, m.waiters[k])
					}
				}
			}
		}
	})
}

// checkAcquire applies an acquire to the model (already advanced to its
// time) and compares the answer.
func checkAcquire(rt *rapid.T, m *queueModel, cmd *LeaseCommand, r *LeaseResult) {
	k := cmd.Key
	for _, h := range m.holders[k] {
		if h.id == cmd.ID {
			if !r.Granted || r.ExpiresAtNanos != h.expiresAt || r.GrantedAtNanos != h.grantedAt || r.WaitedNanos != h.waited {
				rt.Fatalf("retry of held %s: %+v, model %+v", cmd.ID, r, h)
			}
			return
		}
	}
	for i, w := range m.waiters[k] {
		if w.id == cmd.ID {
			if !r.Queued || r.Position != int64(i+1) || r.DeadlineNanos != w.deadline {
				rt.Fatalf("retry of waiting %s: %+v", cmd.ID, r)
			}
			return
		}
	}
	for _, other := range m.holders {
		for _, h := range other {
			if h.id == cmd.ID {
				if r.Rejection == nil {
					rt.Fatalf("%s held for another key, yet %+v", cmd.ID, r)
				}
				return
			}
		}
	}
	for _, other := range m.waiters {
		for _, w := range other {
			if w.id == cmd.ID {
				if r.Rejection == nil {
					rt.Fatalf("%s waits for another key, yet %+v", cmd.ID, r)
				}
				return
			}
		}
	}
	switch {
	case int64(len(m.holders[k])) < cmd.Max:
		m.holders[k] = append(m.holders[k], modelLease{id: cmd.ID, expiresAt: m.now + cmd.TTLNanos, grantedAt: m.now})
		if !r.Granted || r.ExpiresAtNanos != m.now+cmd.TTLNanos || r.GrantedAtNanos != m.now || r.WaitedNanos != 0 {
			rt.Fatalf("free slot, yet %+v", r)
		}
	case cmd.MaxWaitNanos > 0 && int64(len(m.waiters[k])) < cmd.MaxQueue:
		m.waiters[k] = append(m.waiters[k], modelWaiter{cmd.ID, cmd.TTLNanos, m.now, m.now + cmd.MaxWaitNanos})
		if !r.Queued || r.Position != int64(len(m.waiters[k])) {
			rt.Fatalf("room in the queue, yet %+v", r)
		}
	default:
		if r.Granted || r.Queued || r.Rejection != nil || r.RetryAfterNanos != m.retryAfter(k) {
			rt.Fatalf("full, yet %+v (retry after %d)", r, m.retryAfter(k))
		}
	}
}

// checkRelease applies a release or withdrawal to the model; with
// waiterOnly, a held lease is kept.
func checkRelease(rt *rapid.T, m *queueModel, id string, waiterOnly bool, maxHolders int64, r *LeaseResult) {
	for k := range m.waiters {
		if i := slices.IndexFunc(m.waiters[k], func(w modelWaiter) bool { return w.id == id }); i >= 0 {
			m.leave(k, i, true)
			if !r.Withdrawn {
				rt.Fatalf("withdraw %s: %+v", id, r)
			}
			return
		}
	}
	for k := range m.holders {
		if i := slices.IndexFunc(m.holders[k], func(l modelLease) bool { return l.id == id }); i >= 0 {
			if l := m.holders[k][i]; waiterOnly {
				if !r.Granted || r.Released || r.ExpiresAtNanos != l.expiresAt || r.GrantedAtNanos != l.grantedAt || r.WaitedNanos != l.waited {
					rt.Fatalf("withdrawal of the waiter %s, granted %+v: %+v", id, l, r)
				}
				return
			}
			m.holders[k] = slices.Delete(m.holders[k], i, i+1)
			m.grant(k, maxHolders)
			if !r.Released {
				rt.Fatalf("release %s: %+v", id, r)
			}
			return
		}
	}
	if r.Rejection == nil {
		rt.Fatalf("release of unknown %s: %+v", id, r)
	}
}

// TestLeaseQueueGrantsOnlyWithinMaxWait: the one slot, held until t0+4s,
// frees with no entry stamped then; w1 (deadline t0+6s) and w2 (deadline
// t0+7s) wait for it. The next entry's time decides: a waiter is granted
// only by an entry stamped before its deadline, at that entry's time, so
// its wait is always shorter than its max_wait and its lease runs from the
// grant.
func TestLeaseQueueGrantsOnlyWithinMaxWait(t *testing.T) {
	t.Parallel()
	type verdict struct {
		id      string
		granted bool
		waited  int64
	}
	tests := []struct {
		name      string
		nextEntry int64
		want      []verdict // in the order they are reported
		stillWait []string
	}{
		{"an entry before w1's deadline grants w1", t0 + 5*sec, []verdict{{"w1", true, 5 * sec}}, []string{"w2"}},
		{"an entry at w1's deadline times w1 out and grants w2", t0 + 6*sec, []verdict{{"w1", false, 6 * sec}, {"w2", true, 5 * sec}}, nil},
		{"an entry after both deadlines times both out", t0 + 7*sec + sec/2, []verdict{{"w1", false, 7*sec + sec/2}, {"w2", false, 6*sec + sec/2}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := newApplier(t)
			events := recordEvents(a)
			holder := acquire("holder", t0)
			holder.Max, holder.TTLNanos = 1, 4*sec
			a.lease(CommandAcquireLease, holder)
			for i, id := range []string{"w1", "w2"} {
				cmd := waitFor(id, t0+int64(i)*sec)
				cmd.Max, cmd.MaxWaitNanos, cmd.TTLNanos = 1, 6*sec, 3*sec
				a.lease(CommandAcquireLease, cmd)
			}
			a.tick(tt.nextEntry)
			var got []verdict
			for _, ev := range *events {
				r := ev.Result
				got = append(got, verdict{ev.ID, r.Granted, r.WaitedNanos})
				if r.AtNanos != tt.nextEntry {
					t.Errorf("%s: reported at %d, not at the entry's time %d", ev.ID, r.AtNanos, tt.nextEntry)
				}
				if r.Granted && (r.WaitedNanos >= 6*sec || r.GrantedAtNanos != r.AtNanos || r.ExpiresAtNanos != r.AtNanos+3*sec) {
					t.Errorf("%s: granted %+v; want a wait under its max_wait of 6s and an expiry 3s (its TTL) after the grant", ev.ID, r)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("verdicts %+v, want %+v", got, tt.want)
			}
			_, held, queued := a.fsm.Leases("reports", 0)
			var waiting []string
			for _, q := range queued {
				waiting = append(waiting, q.ID)
			}
			if !slices.Equal(waiting, tt.stillWait) {
				t.Fatalf("still waiting %v, want %v", waiting, tt.stillWait)
			}
			if granted := slices.ContainsFunc(tt.want, func(v verdict) bool { return v.granted }); granted != (len(held) == 1) {
				t.Fatalf("held %+v after %+v", held, tt.want)
			}
		})
	}
}

// TestLeaseRetriedAcquireAnswersWithItsGrant: an acquire retried after its
// first attempt waited and was granted (its answer lost) is answered with
// that grant, as a waiter hears it: the grant's time and wait, and its
// expiry. The claim then runs the lease its TTL from the grant, once: a
// retried claim changes nothing, and neither does a claim of a lease that
// was granted at once.
func TestLeaseRetriedAcquireAnswersWithItsGrant(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	events := recordEvents(a)
	a.lease(CommandAcquireLease, acquire("a", t0))
	a.lease(CommandAcquireLease, acquire("b", t0))
	w := waitFor("w", t0+sec) // TTL 10s, over the claim window
	a.lease(CommandAcquireLease, w)
	a.lease(CommandReleaseLease, LeaseCommand{NowNanos: t0 + 3*sec, ID: "a"})
	grant := (*events)[0].Result
	if !grant.Granted || grant.GrantedAtNanos != t0+3*sec || grant.WaitedNanos != 2*sec || grant.ExpiresAtNanos != t0+3*sec+int64(LeaseClaimWindow) {
		t.Fatalf("the grant: %+v", grant)
	}
	w.NowNanos = t0 + 4*sec
	if r := a.lease(CommandAcquireLease, w); !r.Granted || r.GrantedAtNanos != grant.GrantedAtNanos || r.WaitedNanos != grant.WaitedNanos || r.ExpiresAtNanos != grant.ExpiresAtNanos {
		t.Fatalf("the retried acquire: %+v, want the grant %+v", r, grant)
	}
	claim := LeaseCommand{NowNanos: t0 + 5*sec, ID: "w", TTLNanos: w.TTLNanos, AnyOwner: true, Claim: true}
	for range 2 {
		if r := a.lease(CommandRenewLease, claim); !r.Granted || r.ExpiresAtNanos != t0+13*sec || r.GrantedAtNanos != t0+3*sec || r.WaitedNanos != 2*sec {
			t.Fatalf("claim at %d: %+v, want the lease to expire its TTL after its grant, at %d", claim.NowNanos, r, t0+13*sec)
		}
		claim.NowNanos += sec
	}
	claim.ID = "b"
	if r := a.lease(CommandRenewLease, claim); !r.Granted || r.ExpiresAtNanos != t0+10*sec || r.GrantedAtNanos != t0 || r.WaitedNanos != 0 {
		t.Fatalf("claim of a lease granted at once: %+v", r)
	}
	// A snapshot keeps what the answers need.
	b := newApplier(t)
	if err := b.fsm.Restore(io.NopCloser(bytes.NewReader(mustSnapshot(t, a.fsm)))); err != nil {
		t.Fatal(err)
	}
	if r := b.fsm.LeaseOf("w"); !r.Granted || r.GrantedAtNanos != t0+3*sec || r.WaitedNanos != 2*sec || r.ExpiresAtNanos != t0+13*sec {
		t.Fatalf("after a restore: %+v", r)
	}
}

// TestLeaseWithdrawalOfAWaiterOnly: a release with WaiterOnly, which the
// node sends for a caller that still waits but heard no verdict, takes a
// waiting ID out of its queue, and answers a lease granted to the ID
// meanwhile as held, keeping it, with its grant's time and wait.
func TestLeaseWithdrawalOfAWaiterOnly(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.lease(CommandAcquireLease, acquire("a", t0))
	a.lease(CommandAcquireLease, acquire("b", t0))
	a.lease(CommandAcquireLease, waitFor("granted", t0+sec))
	a.lease(CommandAcquireLease, waitFor("waiting", t0+sec))
	a.lease(CommandReleaseLease, LeaseCommand{NowNanos: t0 + 2*sec, ID: "a"}) // grants "granted"
	tests := []struct {
		id   string
		want LeaseResult
	}{
		{"granted", LeaseResult{Granted: true, Active: 2, Waiting: 1, ExpiresAtNanos: t0 + 2*sec + int64(LeaseClaimWindow),
			GrantedAtNanos: t0 + 2*sec, WaitedNanos: sec, AtNanos: t0 + 3*sec}},
		{"waiting", LeaseResult{Withdrawn: true, Active: 2, RetryAfterNanos: 4 * sec, WaitedNanos: 2 * sec, AtNanos: t0 + 3*sec}},
	}
	for _, tt := range tests {
		r := a.lease(CommandReleaseLease, LeaseCommand{NowNanos: t0 + 3*sec, ID: tt.id, AnyOwner: true, WaiterOnly: true})
		if *r != tt.want {
			t.Errorf("%s:\n got  %+v\n want %+v", tt.id, *r, tt.want)
		}
	}
	if r := a.lease(CommandReleaseLease, LeaseCommand{NowNanos: t0 + 3*sec, ID: "nobody", AnyOwner: true, WaiterOnly: true}); r.Rejection == nil || r.Rejection.Code != contract.CodeNotFound {
		t.Errorf("an ID neither held nor waiting: %+v", r)
	}
	if _, held, _ := a.fsm.Leases("reports", 0); len(held) != 2 {
		t.Fatalf("held after the withdrawals: %+v", held)
	}
}

// BenchmarkLeaseQueue measures a lease's turn through the queue, in entries
// applied per op: with a group of 5 slots and 20 waiters, each op gives
// one lease back (its slot going to the first waiter) and queues a new
// request. BenchmarkLeaseNoQueue is the same turn without a queue, one
// release and one acquire into the freed slot: the baseline.
func BenchmarkLeaseQueue(b *testing.B)   { benchmarkLeaseTurns(b, 20) }
func BenchmarkLeaseNoQueue(b *testing.B) { benchmarkLeaseTurns(b, 0) }

func benchmarkLeaseTurns(b *testing.B, waiters int) {
	a := newApplier(b)
	encode := func(ct CommandType, cmd LeaseCommand) []byte {
		data, err := Encode(ct, &cmd)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	request := func(i int) LeaseCommand {
		cmd := LeaseCommand{NowNanos: t0, ID: fmt.Sprintf("r%d", i), Key: "reports", Max: 5, TTLNanos: int64(time.Hour)}
		if waiters > 0 {
			cmd.MaxWaitNanos, cmd.MaxQueue = int64(10*time.Minute), int64(waiters)
		}
		return cmd
	}
	for i := range 5 + waiters {
		a.raw(encode(CommandAcquireLease, request(i)))
	}
	b.ResetTimer()
	for i := range b.N {
		a.raw(encode(CommandReleaseLease, LeaseCommand{NowNanos: t0, ID: fmt.Sprintf("r%d", i)}))
		r, ok := a.raw(encode(CommandAcquireLease, request(5+waiters+i))).(*LeaseResult)
		if !ok || (waiters > 0 && !r.Queued) || (waiters == 0 && !r.Granted) {
			b.Fatalf("turn %d: %+v", i, r)
		}
	}
}
