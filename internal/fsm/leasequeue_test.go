package fsm

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

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
	want := LeaseEvent{ID: "c", Result: LeaseResult{Granted: true, Active: 2, Waiting: 2, ExpiresAtNanos: t0 + 9*sec, WaitedNanos: 2 * sec, AtNanos: t0 + 4*sec}}
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
	id        string
	expiresAt int64
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

// grant gives key's slots, free since freedAt, to its first waiters.
func (m *queueModel) grant(key string, maxHolders, freedAt int64) {
	for len(m.waiters[key]) > 0 && int64(len(m.holders[key])) < maxHolders {
		w := m.waiters[key][0]
		if w.deadline <= freedAt {
			m.leave(key, 0, false)
			continue
		}
		m.waiters[key] = m.waiters[key][1:]
		until := m.now + min(w.ttl, int64(LeaseClaimWindow)) // until its node claims it
		m.holders[key] = append(m.holders[key], modelLease{w.id, until})
		m.events = append(m.events, LeaseEvent{ID: w.id, Result: LeaseResult{Granted: true, Active: int64(len(m.holders[key])),
			Waiting: int64(len(m.waiters[key])), ExpiresAtNanos: until, WaitedNanos: m.now - w.enqueued, AtNanos: m.now}})
	}
}

// advance moves time on, taking what happened since in the order of
// cluster time (a deadline before an expiry at the same instant): a waiter
// past its deadline leaves; an expired lease goes, and its slot goes to the
// first waiter whose deadline is after the expiry.
func (m *queueModel) advance(now int64, maxHolders int64, keys []string) {
	m.now = max(m.now, now)
	type due struct {
		at    int64
		lease int // 0 for a waiter's deadline, 1 for a lease's expiry
		key   string
		id    string
	}
	var dues []due
	for _, k := range keys {
		for _, l := range m.holders[k] {
			if l.expiresAt <= m.now {
				dues = append(dues, due{l.expiresAt, 1, k, l.id})
			}
		}
		for _, w := range m.waiters[k] {
			if w.deadline <= m.now {
				dues = append(dues, due{w.deadline, 0, k, w.id})
			}
		}
	}
	slices.SortFunc(dues, func(a, b due) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.lease, b.lease), strings.Compare(a.id, b.id))
	})
	for i := 0; i < len(dues); {
		d := dues[i]
		if d.lease == 0 {
			if j := slices.IndexFunc(m.waiters[d.key], func(x modelWaiter) bool { return x.id == d.id }); j >= 0 {
				m.leave(d.key, j, false)
			}
			i++
			continue
		}
		// Every lease that expired at this instant goes before any slot
		// is granted.
		var freed []string
		for ; i < len(dues) && dues[i].lease == 1 && dues[i].at == d.at; i++ {
			k, id := dues[i].key, dues[i].id
			m.holders[k] = slices.DeleteFunc(m.holders[k], func(l modelLease) bool { return l.id == id })
			if !slices.Contains(freed, k) {
				freed = append(freed, k)
			}
		}
		for _, k := range freed {
			m.grant(k, maxHolders, d.at)
		}
	}
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
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
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
			case 1: // release or withdraw
				if len(ids) == 0 {
					continue
				}
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				r := a.lease(CommandReleaseLease, LeaseCommand{NowNanos: now, ID: id})
				m.advance(now, maxHolders, keys)
				checkRelease(rt, m, id, maxHolders, r)
			case 2:
				a.tick(now)
				m.advance(now, maxHolders, keys)
			}
			sortEvents := func(ev []LeaseEvent) {
				slices.SortFunc(ev, func(x, y LeaseEvent) int { return strings.Compare(x.ID, y.ID) })
			}
			sortEvents(got)
			sortEvents(m.events)
			if !slices.Equal(got, m.events) {
				rt.Fatalf("step %d events:\n got  %+v\n want %+v", step, got, m.events)
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
			if !r.Granted || r.ExpiresAtNanos != h.expiresAt {
				rt.Fatalf("retry of held %s: %+v", cmd.ID, r)
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
		m.holders[k] = append(m.holders[k], modelLease{cmd.ID, m.now + cmd.TTLNanos})
		if !r.Granted || r.ExpiresAtNanos != m.now+cmd.TTLNanos {
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

// checkRelease applies a release or withdrawal to the model.
func checkRelease(rt *rapid.T, m *queueModel, id string, maxHolders int64, r *LeaseResult) {
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
			m.holders[k] = slices.Delete(m.holders[k], i, i+1)
			m.grant(k, maxHolders, m.now)
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

// TestLeaseQueueKeepsOrderAcrossAGap: a slot freed at t+4s goes to the
// first waiter (deadline t+6s), not to the one behind it, even when the
// next entry comes only at t+6.5s, after the first waiter's deadline.
func TestLeaseQueueKeepsOrderAcrossAGap(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	events := recordEvents(a)
	holder := acquire("holder", t0)
	holder.Max, holder.TTLNanos = 1, 4*sec
	a.lease(CommandAcquireLease, holder)
	for i, id := range []string{"w1", "w2"} {
		cmd := waitFor(id, t0+int64(i)*sec)
		cmd.Max, cmd.MaxWaitNanos = 1, 6*sec
		a.lease(CommandAcquireLease, cmd)
	}
	a.tick(t0 + 6*sec + sec/2)
	if len(*events) != 1 || (*events)[0].ID != "w1" || !(*events)[0].Result.Granted || (*events)[0].Result.ExpiresAtNanos != t0+6*sec+sec/2+int64(LeaseClaimWindow) {
		t.Fatalf("events: %+v", *events)
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
