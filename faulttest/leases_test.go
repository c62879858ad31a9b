package faulttest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/testcluster"
)

// The lease path of a run: clients take one of leaseMax slots of one key,
// some waiting in its queue, hold it briefly and give it back, on random
// nodes through the faults. Every answer carries the cluster time it was
// decided at (a grant's: the time it was granted), so the model below
// checks the semaphore exactly: a slot is granted only when fewer than
// leaseMax are held, a request is refused at once, or joins the queue
// (at its answer's time less its wait), only when all are, a lease lasts
// until it is given back or its TTL of cluster time from its grant passes,
// a waiter is granted only within its max_wait and leaves without a slot
// only once it has run out. checkLeaseQueueOrder checks what the model
// cannot see, the queue's order.
const (
	leaseKey       = "lin-lease"
	leaseMax       = 2
	leaseTTL       = 1500 * time.Millisecond
	leaseWait      = 400 * time.Millisecond
	leaseQueue     = 3
	leaseClients   = 4
	leaseMaxHoldMS = 100
)

type leaseOpKind int

const (
	leaseAcquire leaseOpKind = iota
	leaseRelease
	// leaseJoin is the moment a waiting acquire joined the queue: its
	// answer's time less its wait. It is recorded beside the acquire, over
	// the same interval, so that the model checks the group was full then.
	leaseJoin
)

type leaseInput struct {
	Kind leaseOpKind
	Wait bool   // an acquire with max_wait
	ID   string // a release's lease
	Via  string
}

type leaseOutput struct {
	Known    bool // false: the call failed, and may or may not have taken effect
	Granted  bool // an acquire's outcome
	Released bool // a release's: true, or not found
	ID       string
	At       int64 // cluster time of the decision
	Expires  int64
	Waited   int64
	Attempts int
}

// leaseState is the model's state: the leases known to be held (sorted
// "id@expiry" entries) and how many acquires of unknown outcome may hold a
// slot (any of which may have expired, or been withdrawn, since).
type leaseState struct {
	last      int64
	held      string
	anonymous int
}

type heldLease struct {
	id      string
	expires int64
}

func (s leaseState) leases() []heldLease {
	var out []heldLease
	for _, e := range strings.Split(s.held, ",") {
		if e == "" {
			continue
		}
		var l heldLease
		id, exp, _ := strings.Cut(e, "@")
		l.id = id
		fmt.Sscan(exp, &l.expires)
		out = append(out, l)
	}
	return out
}

func withLeases(s leaseState, ls []heldLease) leaseState {
	slices.SortFunc(ls, func(a, b heldLease) int { return strings.Compare(a.id, b.id) })
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s@%d", l.id, l.expires)
	}
	s.held = strings.Join(parts, ",")
	return s
}

// leaseModel is the sequential specification of one lease group.
var leaseModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{leaseState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(leaseState), input.(leaseInput), output.(leaseOutput)
		var next []any
		for anonymous := 0; anonymous <= s.anonymous; anonymous++ {
			st := s
			st.anonymous = anonymous
			next = append(next, stepLease(st, in, out)...)
		}
		return next
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(leaseInput), output.(leaseOutput)
		what := map[leaseOpKind]string{leaseAcquire: "acquire", leaseRelease: "release " + in.ID, leaseJoin: "join the queue"}[in.Kind]
		if in.Wait {
			what += " waiting"
		}
		if !out.Known {
			return fmt.Sprintf("%s via %s → unknown", what, in.Via)
		}
		return fmt.Sprintf("%s via %s → granted=%v released=%v id=%s at %d expires %d waited %d (%d attempts)",
			what, in.Via, out.Granted, out.Released, out.ID, out.At%1e12, out.Expires%1e12, out.Waited, out.Attempts)
	},
	DescribeState: func(state any) string {
		s := state.(leaseState)
		return fmt.Sprintf("held [%s] + %d unknown, last %d", s.held, s.anonymous, s.last%1e12)
	},
}

// stepLease applies one operation to one state of the model.
func stepLease(s leaseState, in leaseInput, out leaseOutput) []any {
	gone := func(s leaseState) leaseState {
		return withLeases(s, slices.DeleteFunc(s.leases(), func(l heldLease) bool { return l.id == in.ID }))
	}
	if in.Kind == leaseRelease && !out.Released {
		// Not found (it expired, or an earlier attempt gave it back: a
		// refusal carries no time), or unknown.
		return []any{s, gone(s)}
	}
	if !out.Known {
		more := s
		more.anonymous++
		if len(s.leases())+s.anonymous < leaseMax {
			return []any{s, more}
		}
		return []any{s}
	}
	if out.At < s.last {
		return nil
	}
	s.last = out.At
	live := slices.DeleteFunc(s.leases(), func(l heldLease) bool { return l.expires <= out.At })
	s = withLeases(s, live)
	full := len(live)+s.anonymous >= leaseMax
	switch {
	case in.Kind == leaseRelease:
		if !slices.ContainsFunc(live, func(l heldLease) bool { return l.id == in.ID }) {
			return nil
		}
		return []any{gone(s)}
	case in.Kind == leaseJoin: // a request joins the queue only when every slot is held
		if !full {
			return nil
		}
		return []any{s}
	case out.Granted:
		// Granted at out.At, for its TTL from then (leaseTTL is shorter
		// than the claim window, so no claim moves it), having waited
		// less than its max_wait.
		if full || out.Expires != out.At+int64(leaseTTL) || out.Waited < 0 ||
			(!in.Wait && out.Waited != 0) || out.Waited >= int64(leaseWait) {
			return nil
		}
		return []any{withLeases(s, append(live, heldLease{out.ID, out.Expires}))}
	case out.Waited == 0: // refused at once: every slot held
		if !full {
			return nil
		}
		return []any{s}
	default: // left the queue without a slot: only when its wait ran out
		if !in.Wait || out.Waited < int64(leaseWait) {
			return nil
		}
		return []any{s}
	}
}

// leaseRun runs the lease clients of a run until stop is closed.
type leaseRun struct {
	mu      sync.Mutex
	history []porcupine.Operation
	wg      sync.WaitGroup
}

func startLeaseClients(c *testcluster.Cluster, seed uint64, start time.Time, stop <-chan struct{}) *leaseRun {
	r := &leaseRun{}
	for client := range leaseClients {
		crng := rand.New(rand.NewPCG(seed^0x1ea5e, uint64(client)))
		r.wg.Go(func() { r.client(c, crng, 1000+client, start, stop) })
	}
	return r
}

// finish waits for the clients and returns the history; an operation whose
// outcome is unknown may take effect until end.
func (r *leaseRun) finish(end int64) []porcupine.Operation {
	r.wg.Wait()
	for i := range r.history {
		if r.history[i].Return < 0 {
			r.history[i].Return = end
		}
	}
	return r.history
}

func (r *leaseRun) record(op porcupine.Operation) {
	r.mu.Lock()
	r.history = append(r.history, op)
	r.mu.Unlock()
}

func (r *leaseRun) client(c *testcluster.Cluster, crng *rand.Rand, clientID int, start time.Time, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		n := c.Nodes[crng.IntN(len(c.Nodes))]
		node := n.Node()
		if node == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		req := contract.LeaseRequest{Key: leaseKey, Max: leaseMax, TTL: leaseTTL}
		wait := crng.IntN(2) == 0
		if wait {
			req.MaxWait, req.MaxQueue = leaseWait, leaseQueue
		}
		ctx, cancel := context.WithTimeout(context.Background(), req.MaxWait+time.Duration(20+crng.IntN(800))*time.Millisecond)
		call := time.Since(start).Nanoseconds()
		l, err := node.AcquireLease(ctx, req)
		cancel()
		ret := time.Since(start).Nanoseconds()
		in := leaseInput{Kind: leaseAcquire, Wait: wait, Via: n.ID}
		if err != nil {
			r.record(porcupine.Operation{ClientId: clientID, Input: in, Call: call, Output: leaseOutput{}, Return: -1})
			time.Sleep(time.Duration(10+crng.IntN(40)) * time.Millisecond)
			continue
		}
		r.record(porcupine.Operation{ClientId: clientID, Input: in, Call: call, Return: ret,
			Output: leaseOutput{Known: true, Granted: l.Granted, ID: l.ID, At: l.AtNanos, Expires: l.ExpiresAtNanos, Waited: int64(l.Waited), Attempts: 1}})
		if l.Waited > 0 {
			r.record(porcupine.Operation{ClientId: clientID, Input: leaseInput{Kind: leaseJoin, Via: n.ID}, Call: call, Return: ret,
				Output: leaseOutput{Known: true, ID: l.ID, At: l.AtNanos - int64(l.Waited), Attempts: 1}})
		}
		if !l.Granted {
			time.Sleep(time.Duration(crng.IntN(50)) * time.Millisecond)
			continue
		}
		time.Sleep(time.Duration(crng.IntN(leaseMaxHoldMS)) * time.Millisecond)
		r.release(c, crng, clientID, l.ID, start, stop)
	}
}

// release gives a lease back on random nodes until the outcome is known, or
// the run ends (the outcome is then unknown).
func (r *leaseRun) release(c *testcluster.Cluster, crng *rand.Rand, clientID int, id string, start time.Time, stop <-chan struct{}) {
	call := time.Since(start).Nanoseconds()
	for attempts := 1; ; attempts++ {
		n := c.Nodes[crng.IntN(len(c.Nodes))]
		if node := n.Node(); node != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+crng.IntN(500))*time.Millisecond)
			at, err := node.ReleaseLease(ctx, id)
			cancel()
			var notHeld *contract.Error
			released := err == nil
			if released || (errors.As(err, &notHeld) && notHeld.Code == contract.CodeNotFound) {
				r.record(porcupine.Operation{ClientId: clientID, Input: leaseInput{Kind: leaseRelease, ID: id, Via: n.ID}, Call: call,
					Return: time.Since(start).Nanoseconds(), Output: leaseOutput{Known: true, Released: released, At: at, Attempts: attempts}})
				return
			}
		}
		select {
		case <-stop:
			r.record(porcupine.Operation{ClientId: clientID, Input: leaseInput{Kind: leaseRelease, ID: id, Via: n.ID}, Call: call, Return: -1, Output: leaseOutput{}})
			return
		case <-time.After(time.Duration(10+crng.IntN(40)) * time.Millisecond):
		}
	}
}

// checkLeaseRun checks a run's lease operations against leaseModel and the
// queue's order.
func checkLeaseRun(t *testing.T, seed uint64, history []porcupine.Operation) {
	t.Helper()
	model := leaseModel.ToModel()
	if result, info := porcupine.CheckOperationsVerbose(model, history, 2*time.Minute); result != porcupine.Ok {
		dir, _ := os.MkdirTemp("", "limitnode-linearizability-")
		path := filepath.Join(dir, fmt.Sprintf("leases-seed-%d.html", seed))
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Errorf("could not write the visualisation: %v", err)
		}
		t.Fatalf("seed %d: the history of %d lease operations is %v; porcupine's visualisation: %s", seed, len(history), result, path)
	}
	checkLeaseQueueOrder(t, history)
}

// checkLeaseQueueOrder: of two requests that waited, the one that joined the
// queue first (in cluster time) is granted no later; and while a request
// waits, no request that did not wait is granted a slot.
func checkLeaseQueueOrder(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	type waiter struct{ joined, left int64 }
	var waited []waiter
	var granted []waiter // waiters that were granted
	var atOnce []int64   // grants without a wait
	for _, op := range history {
		in, out := op.Input.(leaseInput), op.Output.(leaseOutput)
		if !out.Known || in.Kind != leaseAcquire {
			continue
		}
		switch {
		case out.Waited > 0:
			w := waiter{out.At - out.Waited, out.At}
			waited = append(waited, w)
			if out.Granted {
				granted = append(granted, w)
			}
		case out.Granted:
			atOnce = append(atOnce, out.At)
		}
	}
	slices.SortFunc(granted, func(a, b waiter) int { return cmp.Compare(a.joined, b.joined) })
	for i := 1; i < len(granted); i++ {
		if a, b := granted[i-1], granted[i]; a.joined < b.joined && a.left > b.left {
			t.Fatalf("a waiter that joined at %d was granted at %d, after one that joined later (%d) was granted at %d", a.joined, a.left, b.joined, b.left)
		}
	}
	for _, w := range waited {
		for _, g := range atOnce {
			if w.joined < g && g < w.left {
				t.Fatalf("a slot granted at once at %d while a request waited from %d to %d", g, w.joined, w.left)
			}
		}
	}
	if len(granted) == 0 {
		t.Logf("no request was granted after waiting: the queue's order went unchecked")
	}
}
