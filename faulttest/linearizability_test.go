package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testhooks"

	"github.com/anishathalye/porcupine"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/testcluster"
)

var (
	long     = flag.Bool("faulttest.long", false, "run the long linearizability suite: many seeds, minutes each")
	longRuns = flag.Int("faulttest.runs", 8, "with -faulttest.long: how many seeds")
	longFor  = flag.Duration("faulttest.duration", time.Minute, "with -faulttest.long: how long each run lasts")
)

// The keys of a run and their limits: two token buckets and two fixed
// windows, tight enough that denials, refills and window edges all happen.
var runLimits = map[string]algorithms.Limit{
	"tb-0": {Algorithm: algorithms.TokenBucket, Rate: 20, Period: 2 * time.Second, Burst: 10},
	"tb-1": {Algorithm: algorithms.TokenBucket, Rate: 5, Period: time.Second, Burst: 3},
	"fw-0": {Algorithm: algorithms.FixedWindow, Rate: 15, Period: time.Second},
	"fw-1": {Algorithm: algorithms.FixedWindow, Rate: 40, Period: 3 * time.Second},
	// slow-0 is not in the runs: spent, it stays spent for as long as a
	// test lasts, however loaded the machine.
	"slow-0": {Algorithm: algorithms.TokenBucket, Rate: 3, Period: time.Hour, Burst: 3},
}

type allowInput struct {
	Key  string
	Cost int64
	Via  string // "go n2" or "http n3": where the first attempt went
	// MaxWait, for the token buckets, lets the request be admitted by
	// reservation (algorithms.Reserve).
	MaxWait int64
	// Reset is an operator's reset of the key (DELETE /v1/keys/{key}),
	// not a request: the key starts afresh.
	Reset bool
}

// reservationWait is the max_wait a run gives some token-bucket requests.
const reservationWait = int64(300 * time.Millisecond)

// reservationWaitFor is the most a request under l may have waited.
func reservationWaitFor(l algorithms.Limit) int64 {
	if l.Algorithm.IsBucket() {
		return reservationWait
	}
	return 0
}

type allowOutput struct {
	Allowed   bool
	Remaining int64
	AtNanos   int64 // cluster time of the decision
	Attempts  int
	// Leased: a denial a node answered from a deny lease, repeating one
	// the leader made moments before. It holds if the request is denied at
	// AtNanos (the latest cluster time it may be) on the state the
	// operations before it left; what remains is the first denial's, and
	// it changes nothing.
	Leased bool
}

type keyState struct {
	state algorithms.State
	last  int64
}

// limiterModel is the sequential specification: one key's state under the
// algorithm, each operation decided at the cluster time it reports, cluster
// time never running backwards.
var limiterModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(allowInput).Key
			if byKey[k] == nil {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		slices.Sort(keys)
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return keyState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(keyState), input.(allowInput), output.(allowOutput)
		if in.Reset {
			return true, keyState{last: s.last}
		}
		if out.Leased {
			d, _ := algorithms.Reserve(runLimits[in.Key], s.state, max(s.last, out.AtNanos), in.Cost, time.Duration(in.MaxWait))
			return !out.Allowed && !d.Allowed, s
		}
		if out.AtNanos < s.last {
			return false, s
		}
		d, next := algorithms.Reserve(runLimits[in.Key], s.state, out.AtNanos, in.Cost, time.Duration(in.MaxWait))
		if d.Allowed != out.Allowed || d.Remaining != out.Remaining {
			return false, s
		}
		return true, keyState{state: next, last: out.AtNanos}
	},
	Equal: func(a, b any) bool {
		x, y := a.(keyState), b.(keyState)
		return x.last == y.last && x.state.Equal(y.state)
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(allowInput), output.(allowOutput)
		if in.Reset {
			return fmt.Sprintf("reset %s via %s", in.Key, in.Via)
		}
		leased := ""
		if out.Leased {
			leased = " leased"
		}
		return fmt.Sprintf("%s cost %d via %s → allowed=%v remaining=%d at %d%s (%d attempts)", in.Key, in.Cost, in.Via, out.Allowed, out.Remaining, out.AtNanos%1e12, leased, out.Attempts)
	},
	DescribeState: func(state any) string {
		s := state.(keyState)
		return fmt.Sprintf("%+v last=%d", s.state, s.last%1e12)
	},
}

// runReport is what one run did.
type runReport struct {
	operations, ambiguous, faults int
	history                       []porcupine.Operation
	// rlsHistory holds the gRPC operations (rls_test.go).
	rlsHistory []porcupine.Operation
	// leaseHistory holds the lease operations (leases_test.go).
	leaseHistory []porcupine.Operation
	// extraHistory holds the reservations, settlements and penalized
	// requests (settle_test.go); settleRetries counts the settlements a
	// retry found applied.
	extraHistory  []porcupine.Operation
	settleRetries int
}

// leasedDenials counts the operations of a run answered from deny leases.
func leasedDenials(rep runReport) int {
	n := 0
	for _, op := range rep.history {
		if op.Output.(allowOutput).Leased {
			n++
		}
	}
	for _, op := range rep.rlsHistory {
		if op.Output.(rlsOutput).Leased {
			n++
		}
	}
	return n
}

// httpClient calls any test cluster, plain or secure (LIMITNODE_TEST_SECURE=1).
var httpClient = &http.Client{Timeout: 3 * time.Second, Transport: testcluster.HTTPClient().Transport}

// attempt sends one request to a node, through the Go API or HTTP. An
// error means the outcome is not known.
func attempt(ctx context.Context, n *testcluster.Node, viaHTTP bool, key string, cost, maxWait int64, requestID string) (allowOutput, error) {
	if viaHTTP {
		body := fmt.Sprintf(`{"key":%q,"limit":%s,"cost":%d,"request_id":%q,"max_wait":%q}`, key, limitJSON(runLimits[key]), cost, requestID, time.Duration(maxWait))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.URL()+"/v1/allow", bytes.NewReader([]byte(body)))
		resp, err := httpClient.Do(req)
		if err != nil {
			return allowOutput{}, err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 && resp.StatusCode != 429 {
			return allowOutput{}, fmt.Errorf("status %d: %s", resp.StatusCode, data)
		}
		var out struct {
			Allowed   bool  `json:"allowed"`
			Remaining int64 `json:"remaining"`
		}
		if err := json.Unmarshal(data, &out); err != nil {
			return allowOutput{}, err
		}
		at, err := strconv.ParseInt(resp.Header.Get("X-Limitnode-Decided-At"), 10, 64)
		if err != nil {
			return allowOutput{}, fmt.Errorf("decision time: %w", err)
		}
		return allowOutput{Allowed: out.Allowed, Remaining: out.Remaining, AtNanos: at, Leased: resp.Header.Get("X-Limitnode-Leased") == "true"}, nil
	}
	node := n.Node()
	if node == nil {
		return allowOutput{}, fmt.Errorf("%s is down", n.ID)
	}
	d, err := node.Allow(ctx, contract.Request{RequestID: requestID, MaxWait: time.Duration(maxWait), Checks: []contract.Check{{Key: key, Limit: runLimits[key], Cost: cost}}})
	if err != nil {
		return allowOutput{}, err
	}
	return allowOutput{Allowed: d.Allowed, Remaining: d.Checks[0].Remaining, AtNanos: d.AtNanos, Leased: d.Leased}, nil
}

func limitJSON(l algorithms.Limit) string {
	if l.Algorithm.IsBucket() {
		return fmt.Sprintf(`{"algorithm":%q,"rate":%d,"period":%q,"burst":%d}`, l.Algorithm, l.Rate, l.Period, l.Burst)
	}
	return fmt.Sprintf(`{"algorithm":%q,"rate":%d,"period":%q}`, l.Algorithm, l.Rate, l.Period)
}

// runOnce starts a cluster, lets clients call Allow on random nodes through
// both APIs while a nemesis injects faults for the given duration, then
// heals everything and waits for every operation to get a definite answer.
// An attempt whose outcome is unknown is retried, on any node, with the same
// request ID: the cluster must charge it once, whichever attempt lands, so
// the operation's interval runs from its first call to its definite answer.
func runOnce(t *testing.T, seed uint64, clients int, duration time.Duration, opts testcluster.Options) (*testcluster.Cluster, runReport) {
	c := testcluster.Start(t, 3, opts)
	grpcClients := rlsClients(t, c)
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	keys := []string{"tb-0", "tb-1", "fw-0", "fw-1"}
	start := time.Now()
	stop := make(chan struct{})
	var mu sync.Mutex
	var rep runReport
	var ambiguous atomic.Int64
	leases := startLeaseClients(c, seed, start, stop)
	putExtraPolicies(t, c)
	extras := startExtraClients(c, seed, start, stop)

	var wg sync.WaitGroup
	for client := range clients {
		crng := rand.New(rand.NewPCG(seed, uint64(client)))
		wg.Go(func() {
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				if crng.IntN(4) == 0 {
					// The gRPC path: one attempt, as Envoy makes.
					value, cost, node := rlsValues[crng.IntN(len(rlsValues))], 1+crng.Int64N(3), crng.IntN(len(c.Nodes))
					call := time.Since(start).Nanoseconds()
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+crng.IntN(500))*time.Millisecond)
					out := rlsAttempt(ctx, grpcClients[node], value, cost)
					cancel()
					ret := time.Since(start).Nanoseconds()
					if !out.Known {
						ret = -1 // it may take effect until the end of the run
					}
					mu.Lock()
					rep.rlsHistory = append(rep.rlsHistory, porcupine.Operation{ClientId: client, Input: rlsInput{Value: value, Cost: cost, Via: "grpc " + c.Nodes[node].ID}, Call: call, Output: out, Return: ret})
					mu.Unlock()
					continue
				}
				key := keys[crng.IntN(len(keys))]
				cost := 1 + crng.Int64N(3)
				var maxWait int64
				if runLimits[key].Algorithm.IsBucket() && crng.IntN(3) == 0 {
					maxWait = reservationWait
				}
				id := fmt.Sprintf("s%d-c%d-%d", seed, client, seq)
				viaHTTP := crng.IntN(2) == 0
				first := c.Nodes[crng.IntN(len(c.Nodes))]
				via := map[bool]string{true: "http ", false: "go "}[viaHTTP] + first.ID
				call := time.Since(start).Nanoseconds()
				var out allowOutput
				for tries := 1; ; tries++ {
					node := first
					if tries > 1 {
						node = c.Nodes[crng.IntN(len(c.Nodes))]
					}
					// Short deadlines make attempts time out while their
					// entry is still being committed: outcomes the retry
					// with the same request ID must not charge twice.
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+crng.IntN(500))*time.Millisecond)
					o, err := attempt(ctx, node, viaHTTP, key, cost, maxWait, id)
					cancel()
					if err == nil {
						out = o
						out.Attempts = tries
						break
					}
					if tries == 1 {
						ambiguous.Add(1)
					}
					if time.Since(start) > duration+2*time.Minute {
						t.Errorf("operation %s never got a definite answer: %v", id, err)
						return
					}
					time.Sleep(time.Duration(10+crng.IntN(40)) * time.Millisecond)
				}
				ret := time.Since(start).Nanoseconds()
				mu.Lock()
				rep.history = append(rep.history, porcupine.Operation{ClientId: client, Input: allowInput{Key: key, Cost: cost, Via: via, MaxWait: maxWait}, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}

	// The nemesis: one fault at a time, each undone before the next.
	faults := 0
	for deadline := start.Add(duration); time.Now().Before(deadline); {
		time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
		faults++
		switch rng.IntN(5) {
		case 0: // crash the leader, bring it back
			if l := leaderOrNil(c); l != nil {
				l.Kill()
				time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
				l.Restart()
			}
		case 1: // crash any node
			n := c.Nodes[rng.IntN(len(c.Nodes))]
			n.Kill()
			time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
			n.Restart()
		case 2: // isolate a node (a partition, or a long pause), half the time the leader, cut off while a new one admits
			n := c.Nodes[rng.IntN(len(c.Nodes))]
			if l := leaderOrNil(c); l != nil && rng.IntN(2) == 0 {
				n = l
			}
			c.Isolate(n)
			time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
			c.Net.HealAll()
		case 3: // cut one direction of one link
			a, b := c.Nodes[rng.IntN(3)], c.Nodes[rng.IntN(3)]
			if a != b {
				c.Net.Cut(a.ID, b.ID)
				time.Sleep(time.Duration(300+rng.IntN(1000)) * time.Millisecond)
				c.Net.HealAll()
			}
		case 4: // slow every link out of a node, or hand leadership over
			if rng.IntN(2) == 0 {
				n := c.Nodes[rng.IntN(3)]
				for _, o := range c.Nodes {
					c.Net.Delay(n.ID, o.ID, time.Duration(50+rng.IntN(300))*time.Millisecond)
				}
				time.Sleep(time.Duration(300+rng.IntN(1000)) * time.Millisecond)
				c.Net.HealAll()
			} else if l := leaderOrNil(c); l != nil {
				l.Stop()
				l.Restart()
			}
		}
	}
	c.Net.HealAll()
	close(stop)
	wg.Wait()
	c.WaitConverged()
	end := time.Since(start).Nanoseconds()
	rep.leaseHistory = leases.finish(end)
	var err error
	if rep.extraHistory, err = extras.finish(); err != nil {
		t.Errorf("reservations and penalties: %v", err)
	}
	rep.settleRetries = extras.retried
	for i := range rep.rlsHistory {
		if rep.rlsHistory[i].Return < 0 {
			rep.rlsHistory[i].Return = end
		}
	}
	rep.faults = faults
	rep.ambiguous = int(ambiguous.Load())
	rep.operations = len(rep.history)
	return c, rep
}

func leaderOrNil(c *testcluster.Cluster) *testcluster.Node {
	for _, n := range c.Running() {
		if node := n.Node(); node != nil && node.IsLeader() {
			return n
		}
	}
	return nil
}

// checkRun checks a run's history for linearizability and its invariants.
func checkRun(t *testing.T, c *testcluster.Cluster, seed uint64, rep runReport) {
	t.Helper()
	result, info := porcupine.CheckOperationsVerbose(limiterModel, rep.history, 2*time.Minute)
	if result != porcupine.Ok {
		dir, _ := os.MkdirTemp("", "limitnode-linearizability-")
		path := filepath.Join(dir, fmt.Sprintf("seed-%d.html", seed))
		if err := porcupine.VisualizePath(limiterModel, info, path); err != nil {
			t.Errorf("could not write the visualisation: %v", err)
		}
		t.Fatalf("seed %d: the history of %d operations is %v; porcupine's visualisation: %s", seed, len(rep.history), result, path)
	}
	checkAdmittedWithinBound(t, rep.history)
	checkReplicasAgree(t, c)
	checkSurvivesFullRestart(t, c, rep.history)
	checkRLSRun(t, c, seed, rep.rlsHistory)
	checkLeaseRun(t, seed, rep.leaseHistory)
	checkExtrasRun(t, seed, rep.extraHistory)
}

// checkAdmittedWithinBound: over every interval, a token bucket admitted at
// most burst + rate × (elapsed + the reservations' max_wait) / period, and a
// fixed window at most rate per aligned window.
func checkAdmittedWithinBound(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	type admission struct{ at, cost int64 }
	byKey := map[string][]admission{}
	for _, op := range history {
		if out := op.Output.(allowOutput); out.Allowed {
			in := op.Input.(allowInput)
			byKey[in.Key] = append(byKey[in.Key], admission{out.AtNanos, in.Cost})
		}
	}
	for key, adm := range byKey {
		l := runLimits[key]
		slices.SortFunc(adm, func(a, b admission) int { return int(a.at - b.at) })
		if l.Algorithm == algorithms.FixedWindow {
			perWindow := map[int64]int64{}
			for _, a := range adm {
				perWindow[a.at/int64(l.Period)] += a.cost
				if perWindow[a.at/int64(l.Period)] > l.Rate {
					t.Fatalf("%s: window %d admitted %d > %d", key, a.at/int64(l.Period), perWindow[a.at/int64(l.Period)], l.Rate)
				}
			}
			continue
		}
		for i := range adm {
			sum := int64(0)
			for j := i; j < len(adm); j++ {
				sum += adm[j].cost
				elapsed := adm[j].at - adm[i].at + reservationWait
				if float64(sum) > float64(l.Burst)+float64(l.Rate)*float64(elapsed)/float64(l.Period)+1e-9 {
					t.Fatalf("%s: %d admitted in %s, over burst %d + refill", key, sum, time.Duration(elapsed), l.Burst)
				}
			}
		}
	}
}

// checkReplicasAgree: once every node has applied the same index, their
// states are byte for byte the same.
func checkReplicasAgree(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	deadline := time.Now().Add(testcluster.WaitTimeout)
	for {
		indexes := map[uint64]bool{}
		digests := map[[32]byte]bool{}
		for _, n := range c.Nodes {
			index, digest := testhooks.NodeDigest(n.Node())
			indexes[index] = true
			digests[digest] = true
		}
		if len(indexes) == 1 {
			if len(digests) != 1 {
				t.Fatalf("replicas at the same index hold different states")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas never reached the same applied index: %v", indexes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkSurvivesFullRestart stops every node, starts them again, and checks
// that each key's state is exactly what the acknowledged admissions imply.
func checkSurvivesFullRestart(t *testing.T, c *testcluster.Cluster, history []porcupine.Operation) {
	t.Helper()
	c.StopAll()
	for _, n := range c.Nodes {
		n.Restart()
	}
	c.WaitConverged()
	type admission struct{ at, cost int64 }
	byKey := map[string][]admission{}
	for _, op := range history {
		if out := op.Output.(allowOutput); out.Allowed && op.Input.(allowInput).Cost > 0 {
			in := op.Input.(allowInput)
			byKey[in.Key] = append(byKey[in.Key], admission{out.AtNanos, in.Cost})
		}
	}
	for key, l := range runLimits {
		adm := byKey[key]
		slices.SortFunc(adm, func(a, b admission) int { return int(a.at - b.at) })
		var s algorithms.State
		for _, a := range adm {
			var d algorithms.Decision
			// Admissions of one entry share a time, and their order in it is
			// not known here: replay each with the most any was allowed to
			// wait (the state after them is the same in any order).
			if d, s = algorithms.Reserve(l, s, a.at, a.cost, time.Duration(reservationWaitFor(l))); !d.Allowed {
				t.Fatalf("%s: replaying the acknowledged admissions denies one at %d", key, a.at)
			}
		}
		node := c.Nodes[0].Node()
		d, err := node.Allow(context.Background(), contract.Request{Checks: []contract.Check{{Key: key, Limit: l, Peek: true}}})
		if err != nil {
			t.Fatalf("peek %s after the restart: %v", key, err)
		}
		want, _ := algorithms.Decide(l, s, d.AtNanos, 0)
		if d.Checks[0].Remaining != want.Remaining {
			t.Fatalf("%s after restarting every node: %d remaining, the acknowledged admissions leave %d", key, d.Checks[0].Remaining, want.Remaining)
		}
	}
}

// TestLinearizableUnderFaults is the short run that go test ./... includes,
// on a plain cluster, on one with mutual TLS between the nodes, HTTPS and
// API tokens, and on one whose leader keeps several group-commit entries
// under way at once (the default is one).
func TestLinearizableUnderFaults(t *testing.T) {
	tests := []struct {
		name string
		opts testcluster.Options
	}{
		{"plain", testcluster.Options{}},
		{"secure", testcluster.Options{Secure: true}},
		{"pipelined", pipelined},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLinearizable(t, tt.opts)
		})
	}
}

func checkLinearizable(t *testing.T, opts testcluster.Options) {
	runs, duration := 1, 6*time.Second
	if *long {
		runs, duration = *longRuns, *longFor
	}
	var totalOps, totalAmbiguous, totalFaults int
	for run := range runs {
		seed := uint64(time.Now().UnixNano()) + uint64(run)
		if !*long {
			seed = 1
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			c, rep := runOnce(t, seed, 6, duration, opts)
			t.Logf("seed %d: %d operations (%d ambiguous on the first attempt, %d denials answered from deny leases), %d over gRPC, %d on leases, %d reserving, settling or penalized (%d settlements retried and charged once), %d fault events",
				seed, rep.operations, rep.ambiguous, leasedDenials(rep), len(rep.rlsHistory), len(rep.leaseHistory), len(rep.extraHistory), rep.settleRetries, rep.faults)
			checkRun(t, c, seed, rep)
			totalOps += rep.operations
			totalAmbiguous += rep.ambiguous
			totalFaults += rep.faults
		})
	}
	if !t.Failed() {
		t.Logf("%d histories, %d operations (%d ambiguous), %d fault events: linearizable", runs, totalOps, totalAmbiguous, totalFaults)
	}
}
