package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/algorithms"
)

const t0 = int64(1_800_000_000_000_000_000)

var perMinute100 = algorithms.Limit{Rate: 100, Period: time.Minute, Burst: 100}

// applier feeds commands to an FSM as numbered Raft log entries.
type applier struct {
	t     testing.TB
	fsm   *FSM
	index uint64
	term  uint64 // the Raft term of the entries, 1 unless a test moves it
}

func newApplier(t testing.TB) *applier {
	return &applier{t: t, fsm: New(slog.New(slog.DiscardHandler)), term: 1}
}

func (a *applier) raw(data []byte) any {
	a.index++
	return a.fsm.Apply(&raft.Log{Index: a.index, Term: a.term, Type: raft.LogCommand, Data: data})
}

func (a *applier) allow(now int64, reqs ...Request) []Result {
	a.t.Helper()
	data, err := Encode(CommandAllow, &AllowCommand{NowNanos: now, Requests: reqs})
	if err != nil {
		a.t.Fatal(err)
	}
	resp, ok := a.raw(data).(*Response)
	if !ok {
		a.t.Fatalf("apply did not return a *Response")
	}
	return resp.Results
}

func one(key string, l algorithms.Limit, cost int64) Request {
	return Request{Checks: []Check{inlineCheck(key, l, cost)}}
}

// mustSnapshot returns the canonical snapshot of f (buckets in key order):
// equal bytes mean equal states. Raft's snapshots (Persist) hold the same
// records in the store's order; see persisted.
func mustSnapshot(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.(*snapshot).writeTo(&buf, true); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// persisted returns what Raft would store for f's snapshot, and the
// canonical form of the state restored from it.
func persisted(t testing.TB, snap raft.FSMSnapshot) (stored, restored []byte) {
	t.Helper()
	sink := &memorySink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	fresh := New(slog.New(slog.DiscardHandler))
	if err := fresh.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatalf("Restore of a persisted snapshot: %v", err)
	}
	return sink.Bytes(), mustSnapshot(t, fresh)
}

type memorySink struct{ bytes.Buffer }

func (*memorySink) ID() string    { return "test" }
func (*memorySink) Cancel() error { return nil }
func (*memorySink) Close() error  { return nil }

// randomLog builds a reproducible log of allow commands over a few keys and
// limits, with request IDs, node changes and a clock that sometimes steps back.
func randomLog(t testing.TB, seed uint64, entries int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	limits := []algorithms.Limit{
		perMinute100,
		{Rate: 5, Period: time.Second, Burst: 10},
		{Algorithm: algorithms.GCRA, Rate: 3, Period: time.Second, Burst: 1},
		{Algorithm: algorithms.LeakyBucket, Rate: 4, Period: time.Second, Burst: 4},
		{Algorithm: algorithms.FixedWindow, Rate: 6, Period: time.Second},
		{Algorithm: algorithms.SlidingWindowLog, Rate: 8, Period: 2 * time.Second},
		{Algorithm: algorithms.SlidingWindowCounter, Rate: 7, Period: time.Second},
	}
	var log [][]byte
	now := t0
	for i := range entries {
		now += rng.Int64N(int64(300 * time.Millisecond))
		stamp := now
		if rng.IntN(10) == 0 {
			stamp -= int64(time.Second) // a new leader with a slower clock
		}
		var reqs []Request
		for range 1 + rng.IntN(8) {
			req := Request{}
			for c := range 1 + rng.IntN(3) {
				l := limits[(rng.IntN(len(limits))+c)%len(limits)]
				key := string(rune('a' + rng.IntN(6)))
				if len(req.Checks) > 0 && req.Checks[0].Key == key {
					continue
				}
				if rng.IntN(4) == 0 {
					req.Checks = append(req.Checks, policyCheck(key, "p", nil, rng.Int64N(3)))
					continue
				}
				req.Checks = append(req.Checks, inlineCheck(key, l, rng.Int64N(l.Capacity()+1)))
			}
			if rng.IntN(3) == 0 {
				req.RequestID = string(rune('A' + rng.IntN(20)))
			}
			reqs = append(reqs, req)
		}
		data, err := Encode(CommandAllow, &AllowCommand{NowNanos: stamp, Requests: reqs})
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, data)
		if i%50 == 0 {
			data, _ := Encode(CommandSetNode, &NodeCommand{ID: string(rune('m' + rng.IntN(3))), HTTPAddr: "127.0.0.1:1"})
			log = append(log, data)
			// The policy changes limit and shadow mode now and then.
			p := contract.Policy{Name: "p", Limit: limits[rng.IntN(len(limits))], Shadow: rng.IntN(2) == 0}
			if p.Limit.Capacity() < 2 {
				p.Limit = perMinute100
			}
			data, _ = EncodeAudited("ops", CommandPutPolicy, &p) // recorded in the audit trail
			log = append(log, data)
		}
		if i%11 == 0 {
			// An operator resets a key now and then.
			data, _ := Encode(CommandResetKey, &NamedDeleteCommand{Name: string(rune('a' + rng.IntN(6)))})
			log = append(log, data)
		}
		if i%13 == 0 {
			// An operator blocks a key, or lifts a block, now and then.
			ct, cmd := CommandPutBlock, BlockCommand{NowNanos: stamp, Key: string(rune('a' + rng.IntN(6))), Reason: "abuse", TTLNanos: int64(time.Second) * (1 + rng.Int64N(3))}
			if rng.IntN(3) == 0 {
				ct = CommandDeleteBlock
			}
			data, _ := Encode(ct, &cmd)
			log = append(log, data)
		}
		if i%7 == 0 {
			id := string(rune('A' + rng.IntN(6)))
			ct := CommandAcquireLease
			if rng.IntN(2) == 0 {
				ct = CommandReleaseLease
			}
			data, _ := Encode(ct, &LeaseCommand{NowNanos: stamp, ID: id, Key: "job", Max: 3, TTLNanos: int64(time.Second)})
			log = append(log, data)
		}
	}
	return log
}

func TestSameLogGivesByteIdenticalSnapshots(t *testing.T) {
	t.Parallel()
	for seed := range uint64(5) {
		log := randomLog(t, seed, 400)
		a, b := newApplier(t), newApplier(t)
		for _, e := range log {
			a.raw(e)
		}
		// The second replica applies the same entries in batches of
		// varying size, as raft's BatchingFSM delivers them.
		for i := 0; i < len(log); {
			n := min(1+i%7, len(log)-i)
			var logs []*raft.Log
			for j := range n {
				b.index++
				logs = append(logs, &raft.Log{Index: b.index, Term: b.term, Type: raft.LogCommand, Data: log[i+j]})
			}
			b.fsm.ApplyBatch(logs)
			i += n
		}
		if sa, sb := mustSnapshot(t, a.fsm), mustSnapshot(t, b.fsm); !bytes.Equal(sa, sb) {
			t.Fatalf("seed %d: snapshots differ (%d and %d bytes)", seed, len(sa), len(sb))
		}
	}
}

// TestPersistedSnapshotsRestoreTheState: Raft's snapshots list buckets in
// the store's order, not sorted; restoring one must give the same state,
// after any history of creations, expiries and reused slots.
func TestPersistedSnapshotsRestoreTheState(t *testing.T) {
	t.Parallel()
	for seed := range uint64(5) {
		a := newApplier(t)
		for i, e := range randomLog(t, 100+seed, 400) {
			a.raw(e)
			if i%100 != 99 {
				continue
			}
			snap, err := a.fsm.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if _, got := persisted(t, snap); !bytes.Equal(got, mustSnapshot(t, a.fsm)) {
				t.Fatalf("seed %d, entry %d: the restored state differs", seed, i)
			}
		}
	}
}

func TestRestoredStateDecidesTheSame(t *testing.T) {
	t.Parallel()
	log := randomLog(t, 42, 300)
	original := newApplier(t)
	for _, e := range log[:200] {
		original.raw(e)
	}
	restored := newApplier(t)
	restored.index = original.index // the log goes on at the same index, as Raft's does
	snap, err := original.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := persisted(t, snap)
	if err := restored.fsm.Restore(io.NopCloser(bytes.NewReader(stored))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	for i, e := range log[200:] {
		ra, rb := original.raw(e), restored.raw(e)
		ca, okA := ra.(*Response)
		cb, okB := rb.(*Response)
		if okA != okB || (okA && !equalResults(ca.Results, cb.Results)) {
			t.Fatalf("entry %d decided differently after restore", 200+i)
		}
	}
	if sa, sb := mustSnapshot(t, original.fsm), mustSnapshot(t, restored.fsm); !bytes.Equal(sa, sb) {
		t.Fatal("snapshots differ after the same entries")
	}
}

func equalResults(a, b []Result) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Allowed != b[i].Allowed || a[i].Duplicate != b[i].Duplicate || (a[i].Rejection == nil) != (b[i].Rejection == nil) || len(a[i].Checks) != len(b[i].Checks) {
			return false
		}
		if a[i].Rejection != nil && *a[i].Rejection != *b[i].Rejection {
			return false
		}
		for j := range a[i].Checks {
			if a[i].Checks[j] != b[i].Checks[j] {
				return false
			}
		}
	}
	return true
}

func TestAllowSpendsAndDenies(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	var admitted int
	for range 150 {
		if a.allow(t0, one("k", perMinute100, 1))[0].Allowed {
			admitted++
		}
	}
	if admitted != 100 {
		t.Fatalf("admitted %d of 150 at one instant, want 100", admitted)
	}
	// The same key under another limit is another counter.
	if r := a.allow(t0, one("k", algorithms.Limit{Rate: 10, Period: time.Second, Burst: 10}, 1))[0]; !r.Allowed {
		t.Fatal("a different limit on the same key shared the counter")
	}
}

func TestTimeNeverRunsBackwards(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	l := algorithms.Limit{Rate: 1, Period: time.Second, Burst: 1}
	if !a.allow(t0, one("k", l, 1))[0].Allowed {
		t.Fatal("first request denied")
	}
	// A leader whose clock is an hour behind must not see the bucket as
	// it was an hour ago: the FSM keeps the later time.
	r := a.allow(t0-int64(time.Hour), one("k", l, 1))[0]
	if r.Allowed || int64(r.Checks[0].Decision.RetryAfter) != int64(time.Second) {
		t.Fatalf("stale clock: got %+v, want denied with retry-after 1s", r)
	}
	if got := a.fsm.Stats().NowNanos; got != t0 {
		t.Fatalf("cluster time %d, want %d", got, t0)
	}
}

func TestSeveralChecksAreAllOrNothing(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	global := algorithms.Limit{Rate: 3, Period: time.Hour, Burst: 3}
	perClient := algorithms.Limit{Rate: 2, Period: time.Hour, Burst: 2}
	both := func(client string) Request {
		return Request{Checks: []Check{inlineCheck("client:"+client, perClient, 1), inlineCheck("global", global, 1)}}
	}
	want := []bool{true, true, false, true, false}
	for i, client := range []string{"a", "a", "a", "b", "b"} {
		r := a.allow(t0, both(client))[0]
		if r.Allowed != want[i] {
			t.Fatalf("request %d (client %s): allowed=%v, want %v", i, client, r.Allowed, want[i])
		}
	}
	// Client a's third request was denied by its own limit and took
	// nothing from the global one, so b got the global's last unit; b's
	// second request was denied by the global limit and took nothing
	// from b's own.
	if r := a.allow(t0, one("client:b", perClient, 0))[0]; r.Checks[0].Decision.Remaining != 1 {
		t.Fatalf("client b has %d left, want 1", r.Checks[0].Decision.Remaining)
	}
}

func TestRequestIDIsAnsweredOnce(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	l := algorithms.Limit{Rate: 2, Period: time.Hour, Burst: 2}
	req := one("k", l, 1)
	req.RequestID = "retry-me"
	first := a.allow(t0, req)[0]
	for range 3 {
		again := a.allow(t0+int64(time.Second), req)[0]
		if !again.Duplicate || !equalResults([]Result{{Allowed: first.Allowed, Checks: first.Checks}}, []Result{{Allowed: again.Allowed, Checks: again.Checks}}) {
			t.Fatalf("retry answered %+v, want the first result %+v", again, first)
		}
	}
	if r := a.allow(t0+int64(time.Second), one("k", l, 0))[0]; r.Checks[0].Decision.Remaining != 1 {
		t.Fatalf("retries consumed: %d left, want 1", r.Checks[0].Decision.Remaining)
	}
	// After the window the ID is forgotten and counts as new.
	if r := a.allow(t0+int64(DedupWindow), req)[0]; r.Duplicate {
		t.Fatal("request ID remembered past the dedup window")
	}
}

// TestRequestIDsAreBoundedPerCaller: a caller at its bound of remembered
// IDs is refused new ones, naming request_id, and its refused requests
// consume nothing; its own retries stay duplicates, another caller's new
// IDs are taken, and no ID is forgotten before its window to make room.
// Once its oldest IDs reach the end of their window, the caller may send
// new ones again.
func TestRequestIDsAreBoundedPerCaller(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	l := algorithms.Limit{Rate: 100, Period: time.Hour, Burst: 100}
	send := func(at int64, scope, id string) Result {
		req := one("k", l, 1)
		req.Scope, req.RequestID = scope, id
		data, err := Encode(CommandAllow, &AllowCommand{NowNanos: at, Requests: []Request{req}, MaxIDsPerCaller: 3})
		if err != nil {
			t.Fatal(err)
		}
		return a.raw(data).(*Response).Results[0]
	}
	steps := []struct {
		name             string
		at               int64
		scope, id        string
		admitted, refuse bool
		duplicate        bool
	}{
		{"alice's payment", t0, "alice", "payment-42", true, false, false},
		{"mallory's first", t0, "mallory", "m-1", true, false, false},
		{"mallory's second", t0, "mallory", "m-2", true, false, false},
		{"mallory's third, at her bound", t0, "mallory", "m-3", true, false, false},
		{"mallory's fourth, past it", t0 + 1, "mallory", "m-4", false, true, false},
		{"mallory's retry of her first", t0 + 1, "mallory", "m-1", true, false, true},
		{"alice's retry, after mallory's flood", t0 + 2, "alice", "payment-42", true, false, true},
		{"alice's next", t0 + 2, "alice", "payment-43", true, false, false},
		{"a caller without a token, the cluster's only bound", t0 + 2, "", "anon-1", true, false, false},
		{"another without a token", t0 + 2, "", "anon-2", true, false, false},
		{"a third", t0 + 2, "", "anon-3", true, false, false},
		{"a fourth", t0 + 2, "", "anon-4", true, false, false},
	}
	for _, st := range steps {
		r := send(st.at, st.scope, st.id)
		refused := r.Rejection != nil
		if refused != st.refuse || (refused && (r.Rejection.Code != contract.CodeResourceExhausted || r.Rejection.Field != "request_id")) {
			t.Fatalf("%s: rejection %v, want refused %v (resource_exhausted, request_id)", st.name, r.Rejection, st.refuse)
		}
		if r.Allowed != st.admitted || r.Duplicate != st.duplicate {
			t.Fatalf("%s: allowed %v duplicate %v, want %v %v", st.name, r.Allowed, r.Duplicate, st.admitted, st.duplicate)
		}
	}
	if left := a.remaining(t0+2, one("k", l, 0).Checks[0]); left != 100-9 {
		t.Errorf("%d left, want the 9 first admissions charged once each", left)
	}
	if r := send(t0+int64(DedupWindow), "mallory", "m-5"); r.Rejection != nil {
		t.Fatalf("mallory's, once her first IDs ended: %v", r.Rejection)
	}
	restored := New(nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(mustSnapshot(t, a.fsm)))); err != nil {
		t.Fatal(err)
	}
	a.fsm = restored
	for _, id := range []string{"m-6", "m-7"} {
		if r := send(t0+int64(DedupWindow), "mallory", id); r.Rejection != nil {
			t.Fatalf("after a snapshot, mallory's %s, within her bound: %v", id, r.Rejection)
		}
	}
	if r := send(t0+int64(DedupWindow), "mallory", "m-8"); r.Rejection == nil {
		t.Fatal("after a snapshot, mallory's count was lost: a fourth live ID was taken")
	}
}

func TestIdleStateIsDropped(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	l := algorithms.Limit{Rate: 10, Period: time.Second, Burst: 10}
	for i := range 1000 {
		a.allow(t0, one(string(rune(0x100+i)), l, 3))
	}
	if got := a.fsm.Stats().Keys; got != 1000 {
		t.Fatalf("%d keys with state, want 1000", got)
	}
	// 3 tokens refill in exactly 300ms: one nanosecond before, all state
	// is live; at 300ms it is equivalent to no state and is deleted.
	a.allow(t0+int64(300*time.Millisecond)-1, one("other", l, 0))
	if got := a.fsm.Stats().Keys; got != 1000 {
		t.Fatalf("%d keys 1ns before refill, want 1000", got)
	}
	a.allow(t0+int64(300*time.Millisecond), one("other", l, 0))
	if got := a.fsm.Stats().Keys; got != 0 {
		t.Fatalf("%d keys after refill, want 0", got)
	}
}

func TestCorruptEntriesChangeNothing(t *testing.T) {
	t.Parallel()
	good, err := Encode(CommandAllow, &AllowCommand{NowNanos: t0, Requests: []Request{one("k", perMinute100, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"an empty entry", nil},
		{"an unknown type", append([]byte{99}, good[1:]...)},
		{"a truncated body", good[:len(good)-3]},
		{"trailing bytes", append(append([]byte{}, good...), 0xc0)},
		{"a body of the wrong shape", append([]byte{byte(CommandAllow)}, 0x93, 0x01, 0x02, 0x03)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := newApplier(t)
			before := mustSnapshot(t, a.fsm)
			resp := a.raw(tt.data)
			if err, ok := resp.(error); !ok || !errors.Is(err, ErrCorruptCommand) {
				t.Fatalf("apply returned %v, want ErrCorruptCommand", resp)
			}
			if !bytes.Equal(before, mustSnapshot(t, a.fsm)) {
				t.Fatal("a corrupt entry changed the state")
			}
		})
	}
}

func TestInvalidRequestsAreRefusedOneByOne(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	bad := []Request{
		one("", perMinute100, 1),
		one("k", algorithms.Limit{Rate: 0, Period: 1e9, Burst: 1}, 1),
		one("k", perMinute100, 101),
		{Checks: []Check{inlineCheck("k", perMinute100, 1), inlineCheck("k", perMinute100, 1)}},
		{RequestID: string(make([]byte, contract.MaxRequestIDBytes+1)), Checks: []Check{inlineCheck("k", perMinute100, 1)}},
		{},
	}
	results := a.allow(t0, append(bad, one("k", perMinute100, 1))...)
	for i, r := range results[:len(bad)] {
		if r.Rejection == nil || r.Allowed {
			t.Errorf("invalid request %d answered %+v", i, r)
		}
	}
	if last := results[len(bad)]; !last.Allowed || last.Checks[0].Decision.Remaining != 99 {
		t.Fatalf("the valid request after them got %+v", last)
	}
}

func TestCorruptSnapshotKeepsState(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	for _, e := range randomLog(t, 7, 50) {
		a.raw(e)
	}
	good := mustSnapshot(t, a.fsm)
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"truncated", good[:len(good)/2]},
		{"trailing garbage", append(append([]byte{}, good...), 1, 2, 3)},
		{"another version", func() []byte { b := append([]byte{}, good...); b[1] = 9; return b }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			target := newApplier(t)
			for _, e := range randomLog(t, 8, 20) {
				target.raw(e)
			}
			before := mustSnapshot(t, target.fsm)
			err := target.fsm.Restore(io.NopCloser(bytes.NewReader(tt.data)))
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("Restore = %v, want ErrCorruptSnapshot", err)
			}
			if !bytes.Equal(before, mustSnapshot(t, target.fsm)) {
				t.Fatal("a failed restore changed the state")
			}
		})
	}
}

func TestNodeAddresses(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	set, _ := Encode(CommandSetNode, &NodeCommand{ID: "n1", HTTPAddr: "127.0.0.1:7001"})
	a.raw(set)
	if got := a.fsm.NodeHTTPAddr("n1"); got != "127.0.0.1:7001" {
		t.Fatalf("NodeHTTPAddr = %q", got)
	}
	remove, _ := Encode(CommandRemoveNode, &NodeCommand{ID: "n1"})
	a.raw(remove)
	if got := a.fsm.NodeHTTPAddr("n1"); got != "" {
		t.Fatalf("NodeHTTPAddr after removal = %q", got)
	}
}

func BenchmarkApplyBatch(b *testing.B) {
	a := newApplier(b)
	reqs := make([]Request, 256)
	for i := range reqs {
		reqs[i] = one(string(rune(0x100+i)), perMinute100, 1)
	}
	now := t0
	data, _ := Encode(CommandAllow, &AllowCommand{NowNanos: now, Requests: reqs})
	b.ReportAllocs()
	for b.Loop() {
		a.raw(data)
	}
	b.ReportMetric(float64(b.N*len(reqs))/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkEncodeDecodeAllowCommand measures the command encoding of a
// 256-request entry both ways (the leader encodes, every replica decodes).
func BenchmarkEncodeDecodeAllowCommand(b *testing.B) {
	reqs := make([]Request, 256)
	for i := range reqs {
		reqs[i] = Request{RequestID: fmt.Sprintf("req-%d", i), Checks: []Check{inlineCheck(fmt.Sprintf("api-key:%06d", i), perMinute100, 1)}}
	}
	cmd := &AllowCommand{NowNanos: t0, Requests: reqs, MaxKeys: 5_000_000}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Encode(CommandAllow, cmd); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*len(reqs))/b.Elapsed().Seconds(), "requests/s")
	})
	data, _ := Encode(CommandAllow, cmd)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out AllowCommand
			if err := decodeBody(data[1:], &out); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*len(reqs))/b.Elapsed().Seconds(), "requests/s")
		b.ReportMetric(float64(len(data))/float64(len(reqs)), "bytes/request")
	})
}

// TestSnapshotIsAPointInTime: Raft persists a snapshot while applies go on.
// Whatever is applied between Snapshot and Persist (updates, new keys,
// expiries, reused slots) must not reach the snapshot.
func TestSnapshotIsAPointInTime(t *testing.T) {
	t.Parallel()
	log := randomLog(t, 11, 300)
	a := newApplier(t)
	for _, e := range log[:150] {
		a.raw(e)
	}
	want := mustSnapshot(t, a.fsm) // persisted at once
	snap, err := a.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range log[150:] {
		a.raw(e)
	}
	a.allow(t0+int64(time.Hour), one("late", perMinute100, 5)) // expires everything else
	if _, got := persisted(t, snap); !bytes.Equal(want, got) {
		t.Fatal("entries applied after Snapshot changed what Persist wrote")
	}
}
