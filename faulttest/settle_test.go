package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/testcluster"
)

// Reservations settled, and a penalty, in a run: on a policy with max_debt
// (settledPolicy), clients reserve up to its burst and settle with less, as
// much or more, retrying a settlement whose outcome is unknown with the same
// cost (it must be charged once) and a reservation with the same request
// ID; besides them, plain requests of the same key. On a policy with a
// penalty (penaltyPolicy), clients ask often enough to be denied, blocked
// and let through again. Every answer carries the cluster time it was
// decided at, and extrasModel checks each key's history exactly: the
// bucket under the algorithm, the open reservations with what each took
// (algorithms.Reserved), each refund or charge as algorithms.Refund and
// Charge make it at its settlement's time, and the penalty's count, window
// and block as the state machine keeps them.
const (
	settledKey    = "lin-settled"
	settledPolicy = "lin-settled"
	penaltyKey    = "lin-penalized"
	penaltyPolicy = "lin-penalty"
	extraClients  = 3
	settleTTL     = time.Minute // longer than a run: no reservation ends unsettled in one
)

var (
	settledLimit = algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 20, Period: 2 * time.Second, Burst: 10}
	settledDebt  = int64(4)
	// penaltyLimit is low enough that three clients, slowed by a loaded
	// machine to a few requests a second in all, still spend it.
	penaltyLimit = algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 1, Period: time.Second, Burst: 1}
	penaltyRule  = contract.Penalty{Denials: 3, Within: 500 * time.Millisecond, BlockFor: time.Second}
)

type extraOpKind int

const (
	extraAllow   extraOpKind = iota // a plain request
	extraReserve                    // a request to settle
	extraSettle                     // its settlement
)

type extraInput struct {
	Kind extraOpKind
	Key  string
	Cost int64  // an allow's or reservation's cost; a settlement's used
	ID   string // a settlement's reservation
	Via  string
}

type extraOutput struct {
	Allowed   bool
	Remaining int64
	ID        string // a reservation's settlement ID
	Refunded  int64
	Charged   int64
	AtNanos   int64
	Attempts  int
}

// openReservation is a reservation in extrasModel's state.
type openReservation struct {
	id       string
	r        algorithms.UpfrontCharge
	reserved int64
}

type extraState struct {
	state algorithms.State
	last  int64
	open  []openReservation // sorted by id
	// The penalty: denials counted in the window that ends at windowEnd,
	// and the block's end.
	count, windowEnd, blockedUntil int64
}

func (s extraState) equal(o extraState) bool {
	return s.last == o.last && s.state.Equal(o.state) && slices.Equal(s.open, o.open) &&
		s.count == o.count && s.windowEnd == o.windowEnd && s.blockedUntil == o.blockedUntil
}

func extraLimit(key string) (algorithms.Limit, int64) {
	if key == penaltyKey {
		return penaltyLimit, 0
	}
	return settledLimit, settledDebt
}

var extrasModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(extraInput).Key
			byKey[k] = append(byKey[k], op)
		}
		return [][]porcupine.Operation{byKey[settledKey], byKey[penaltyKey]}
	},
	Init: func() any { return extraState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(extraState), input.(extraInput), output.(extraOutput)
		if out.AtNanos < s.last {
			return false, s
		}
		l, debt := extraLimit(in.Key)
		next := s
		next.last = out.AtNanos
		next.open = slices.Clone(s.open)
		switch in.Kind {
		case extraSettle:
			i := slices.IndexFunc(next.open, func(r openReservation) bool { return r.id == in.ID })
			if i < 0 {
				return false, s
			}
			o := next.open[i]
			next.open = slices.Delete(next.open, i, i+1)
			var refunded, charged int64
			switch {
			case in.Cost < o.reserved:
				next.state, refunded = algorithms.Refund(l, s.state, out.AtNanos, o.r, o.reserved-in.Cost)
			case in.Cost > o.reserved:
				next.state, charged = algorithms.Charge(l, s.state, out.AtNanos, in.Cost-o.reserved, debt)
			}
			return refunded == out.Refunded && charged == out.Charged, next
		}
		if s.blockedUntil > out.AtNanos {
			return !out.Allowed && out.Remaining == 0 && out.ID == "", next
		}
		d, after := algorithms.Decide(l, s.state, out.AtNanos, in.Cost)
		if d.Allowed != out.Allowed || d.Remaining != out.Remaining || (out.ID != "") != (d.Allowed && in.Kind == extraReserve) {
			return false, s
		}
		next.state = after
		if d.Allowed && in.Kind == extraReserve {
			next.open = append(next.open, openReservation{id: out.ID, r: algorithms.ChargedUpfront(l, after, out.AtNanos, in.Cost), reserved: in.Cost})
			slices.SortFunc(next.open, func(a, b openReservation) int { return cmpString(a.id, b.id) })
		}
		if !d.Allowed && in.Key == penaltyKey {
			if next.count > 0 && next.windowEnd <= out.AtNanos {
				next.count = 0
			}
			if next.count == 0 {
				next.windowEnd = out.AtNanos + int64(penaltyRule.Within)
			}
			if next.count++; next.count >= penaltyRule.Denials {
				next.count, next.blockedUntil = 0, out.AtNanos+int64(penaltyRule.BlockFor)
			}
		}
		return true, next
	},
	Equal: func(a, b any) bool { return a.(extraState).equal(b.(extraState)) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(extraInput), output.(extraOutput)
		switch in.Kind {
		case extraSettle:
			return fmt.Sprintf("settle %s with %d via %s → refunded %d charged %d at %d (%d attempts)", in.ID, in.Cost, in.Via, out.Refunded, out.Charged, out.AtNanos%1e12, out.Attempts)
		case extraReserve:
			return fmt.Sprintf("reserve %d of %s via %s → allowed=%v remaining=%d id=%s at %d (%d attempts)", in.Cost, in.Key, in.Via, out.Allowed, out.Remaining, out.ID, out.AtNanos%1e12, out.Attempts)
		}
		return fmt.Sprintf("%s cost %d via %s → allowed=%v remaining=%d at %d (%d attempts)", in.Key, in.Cost, in.Via, out.Allowed, out.Remaining, out.AtNanos%1e12, out.Attempts)
	},
	DescribeState: func(state any) string {
		s := state.(extraState)
		return fmt.Sprintf("%+v last=%d open=%d count=%d blocked until %d", s.state, s.last%1e12, len(s.open), s.count, s.blockedUntil%1e12)
	},
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// extrasRun is the clients of reservations and penalties in one run.
type extrasRun struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	history []porcupine.Operation
	// retried counts the settlements answered as a duplicate: a retry
	// after an unknown outcome that found the first attempt applied.
	retried int
	failed  error
}

// putExtraPolicies stores the run's policies through the leader.
func putExtraPolicies(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	leader := c.WaitLeader()
	for _, p := range []contract.Policy{
		{Name: settledPolicy, Limit: settledLimit, MaxDebt: settledDebt},
		{Name: penaltyPolicy, Limit: penaltyLimit, Penalty: &penaltyRule},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
		err := leader.Node().PutPolicy(ctx, p)
		cancel()
		if err != nil {
			t.Fatalf("put policy %s: %v", p.Name, err)
		}
	}
}

func startExtraClients(c *testcluster.Cluster, seed uint64, start time.Time, stop <-chan struct{}) *extrasRun {
	r := &extrasRun{}
	for client := range extraClients {
		crng := rand.New(rand.NewPCG(seed^0x5e771e, uint64(client)))
		r.wg.Go(func() { r.client(c, crng, 2000+client, seed, start, stop) })
	}
	return r
}

// finish waits for the clients and returns the history.
func (r *extrasRun) finish() ([]porcupine.Operation, error) {
	r.wg.Wait()
	return r.history, r.failed
}

// coverage counts the settlements of a history, and its denials of the
// penalty key with nothing left (spent, or blocked): a run that has
// neither has not reached what it checks.
func coverage(history []porcupine.Operation) (settled, blocked int) {
	for _, op := range history {
		switch in := op.Input.(extraInput); {
		case in.Kind == extraSettle:
			settled++
		case in.Key == penaltyKey && !op.Output.(extraOutput).Allowed && op.Output.(extraOutput).Remaining == 0:
			blocked++
		}
	}
	return settled, blocked
}

// reached reports whether the history so far has a settlement and a spent
// or blocked denial of the penalty key.
func (r *extrasRun) reached() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	settled, blocked := coverage(r.history)
	return settled > 0 && blocked > 0
}

func (r *extrasRun) record(op porcupine.Operation, duplicate bool) {
	r.mu.Lock()
	r.history = append(r.history, op)
	if duplicate {
		r.retried++
	}
	r.mu.Unlock()
}

func (r *extrasRun) fail(err error) {
	r.mu.Lock()
	r.failed = cmpOr(r.failed, err)
	r.mu.Unlock()
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// untilKnown calls do on random nodes, with short deadlines, until one
// answers: an outcome that is not known is tried again the same way (with
// the same request ID or settlement), which the cluster must apply once.
func untilKnown[T any](c *testcluster.Cluster, crng *rand.Rand, start time.Time, do func(ctx context.Context, n *testcluster.Node) (T, error)) (T, int, error) {
	for tries := 1; ; tries++ {
		n := c.Nodes[crng.IntN(len(c.Nodes))]
		var out T
		err := errors.New("down")
		if n.Node() != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+crng.IntN(500))*time.Millisecond)
			out, err = do(ctx, n)
			cancel()
		}
		if err == nil {
			return out, tries, nil
		}
		var refused *contract.Error
		if errors.As(err, &refused) && refused.Code != contract.CodeResourceExhausted {
			return out, tries, err // a definite refusal
		}
		if time.Since(start) > 3*time.Minute {
			return out, tries, fmt.Errorf("never a definite answer: %w", err)
		}
		time.Sleep(time.Duration(10+crng.IntN(40)) * time.Millisecond)
	}
}

func (r *extrasRun) client(c *testcluster.Cluster, crng *rand.Rand, clientID int, seed uint64, start time.Time, stop <-chan struct{}) {
	allow := func(key, policy string, kind extraOpKind, cost int64, id string) {
		call := time.Since(start).Nanoseconds()
		var via string
		d, tries, err := untilKnown(c, crng, start, func(ctx context.Context, n *testcluster.Node) (contract.Decision, error) {
			via = n.ID
			req := contract.Request{RequestID: id, Checks: []contract.Check{{Key: key, Policy: policy, Cost: cost}}}
			if kind == extraReserve {
				req.SettleTTL = settleTTL
			}
			return n.Node().Allow(ctx, req)
		})
		if err != nil {
			r.fail(fmt.Errorf("%s: %w", id, err))
			return
		}
		out := extraOutput{Allowed: d.Allowed, Remaining: d.Checks[0].Remaining, ID: d.SettlementID, AtNanos: d.AtNanos, Attempts: tries}
		r.record(porcupine.Operation{ClientId: clientID, Input: extraInput{Kind: kind, Key: key, Cost: cost, Via: via}, Call: call, Output: out, Return: time.Since(start).Nanoseconds()}, false)
		if kind != extraReserve || !d.Allowed {
			return
		}
		time.Sleep(time.Duration(crng.IntN(100)) * time.Millisecond)
		used := crng.Int64N(2*cost + 1)
		call = time.Since(start).Nanoseconds()
		s, tries, err := untilKnown(c, crng, start, func(ctx context.Context, n *testcluster.Node) (contract.Settlement, error) {
			via = n.ID
			return n.Node().Settle(ctx, contract.SettleRequest{ID: d.SettlementID, Cost: used})
		})
		if err != nil {
			r.fail(fmt.Errorf("settle %s: %w", d.SettlementID, err))
			return
		}
		r.record(porcupine.Operation{ClientId: clientID, Input: extraInput{Kind: extraSettle, Key: key, Cost: used, ID: d.SettlementID, Via: via}, Call: call,
			Output: extraOutput{Refunded: s.Refunded, Charged: s.Charged, AtNanos: s.AtNanos, Attempts: tries}, Return: time.Since(start).Nanoseconds()}, s.Duplicate)
	}
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			// A run on a loaded machine may end before its history holds
			// what checkExtrasRun needs: the clients go on, the faults
			// over, until it does.
			if r.reached() || time.Since(start) > 3*time.Minute {
				return
			}
		default:
		}
		id := fmt.Sprintf("x%d-c%d-%d", seed, clientID, seq)
		switch crng.IntN(4) {
		case 0, 1:
			allow(settledKey, settledPolicy, extraReserve, 1+crng.Int64N(settledLimit.Burst), id)
		case 2:
			allow(settledKey, settledPolicy, extraAllow, 1+crng.Int64N(3), id)
		case 3:
			allow(penaltyKey, penaltyPolicy, extraAllow, 1, id)
		}
	}
}

// checkExtrasRun checks the reservations' and the penalty's history.
func checkExtrasRun(t *testing.T, seed uint64, history []porcupine.Operation) {
	t.Helper()
	result, info := porcupine.CheckOperationsVerbose(extrasModel, history, 2*time.Minute)
	if result != porcupine.Ok {
		dir, _ := os.MkdirTemp("", "limitnode-settle-")
		path := filepath.Join(dir, fmt.Sprintf("seed-%d.html", seed))
		if err := porcupine.VisualizePath(extrasModel, info, path); err != nil {
			t.Errorf("could not write the visualisation: %v", err)
		}
		t.Fatalf("seed %d: the history of %d reservations, settlements and penalized requests is %v; porcupine's visualisation: %s", seed, len(history), result, path)
	}
	if settled, blocked := coverage(history); settled == 0 || blocked == 0 {
		t.Errorf("seed %d: %d settlements and %d blocked-or-spent denials: the run did not reach what it checks", seed, settled, blocked)
	}
}
