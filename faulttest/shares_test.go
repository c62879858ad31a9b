package faulttest

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// shareLimits are the keys of TestSharesHoldTheLimitUnderFaults: limits
// the clients ask more of than they give, so that shares are granted from
// what refills all along the run, and the holders spend to the last unit.
var shareLimits = map[string]algorithms.Limit{
	"shared-tb":  {Algorithm: algorithms.TokenBucket, Rate: 100, Period: time.Second, Burst: 50},
	"shared-fw":  {Algorithm: algorithms.FixedWindow, Rate: 100, Period: time.Second},
	"shared-log": {Algorithm: algorithms.SlidingWindowLog, Rate: 100, Period: time.Second},
}

// TestSharesHoldTheLimitUnderFaults spends keys with local shares through
// every node, several times their budget, while the nemesis kills nodes
// holding shares (kill -9: their unspent units are lost, never doubled),
// cuts nodes off (a holder cut off keeps spending its share until it ends,
// and not after), skews clocks and hands leadership over. Beside the
// nodes, a caller holds shares itself (take_share): it spends part of each
// until its deadline and gives the rest back; and a stranger gives back
// shares it does not hold, by every id it can make, under another holder's
// name or its own: each of its returns must give back nothing. What was
// acknowledged as admitted, on every node and by the holder together, must
// stay within each key's limit, over every interval.
func TestSharesHoldTheLimitUnderFaults(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitConverged()
	shares := &contract.LocalShares{TTL: 300 * time.Millisecond}
	keys := []string{"shared-tb", "shared-fw", "shared-log"}
	run := newShareRun()
	run.clients(9, 3, func(rng *rand.Rand) {
		k, node := rng.IntN(len(keys)), c.Nodes[rng.IntN(len(c.Nodes))].Node()
		if node == nil { // down
			time.Sleep(5 * time.Millisecond)
			return
		}
		req := contract.Request{Checks: []contract.Check{{Key: keys[k], Limit: shareLimits[keys[k]], Cost: 1 + rng.Int64N(3), LocalShares: shares}}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+rng.IntN(500))*time.Millisecond)
		d, err := node.Allow(ctx, req)
		cancel()
		if err == nil && d.Allowed {
			run.record(keys[k], d.AtNanos, req.Checks[0].Cost, d.Shared)
		}
		if err != nil {
			time.Sleep(5 * time.Millisecond)
		}
	})
	record := func(key string, at, cost int64) { run.record(key, at, cost, false) }
	var lastShareID atomic.Uint64 // the latest share the holder took: what a stranger would guess
	run.wg.Go(func() { holdShares(t, c, keys, run.stop, record, &lastShareID) })
	run.wg.Go(func() { returnOthersShares(t, c, keys, run.stop, &lastShareID) })
	shareNemesis(c, rand.New(rand.NewPCG(11, 13)), 8*time.Second)
	run.finish(t, keys)
}

// shareRun is what a share fault run keeps: the admissions its callers
// saw, by key, how many of them a share answered, and the goroutines that
// run until it stops.
type shareRun struct {
	mu         sync.Mutex
	admitted   map[string][]testenv.Admission
	fromShares atomic.Int64
	stop       chan struct{}
	wg         sync.WaitGroup
}

func newShareRun() *shareRun {
	return &shareRun{admitted: map[string][]testenv.Admission{}, stop: make(chan struct{})}
}

// record notes units of key admitted at cluster time at, by a share when
// shared.
func (r *shareRun) record(key string, at, units int64, shared bool) {
	r.mu.Lock()
	r.admitted[key] = append(r.admitted[key], testenv.Admission{At: at, Units: units})
	r.mu.Unlock()
	if shared {
		r.fromShares.Add(1)
	}
}

// clients starts n callers, each calling spend again and again with a
// generator of its own (seeded by its number and seed) until the run stops.
func (r *shareRun) clients(n int, seed uint64, spend func(rng *rand.Rand)) {
	for client := range n {
		rng := rand.New(rand.NewPCG(uint64(client), seed))
		r.wg.Go(func() {
			for {
				select {
				case <-r.stop:
					return
				default:
				}
				spend(rng)
			}
		})
	}
}

// finish stops the run and checks that every key kept its limit
// (shareLimits) over every interval, and that shares answered some calls.
func (r *shareRun) finish(t *testing.T, keys []string) {
	t.Helper()
	close(r.stop)
	r.wg.Wait()
	for _, key := range keys {
		if over := testenv.OverTheLimit(shareLimits[key], r.admitted[key]); over != "" {
			t.Errorf("%s: %s", key, over)
		}
		t.Logf("%s: %d admissions", key, len(r.admitted[key]))
	}
	t.Logf("%d answered from shares", r.fromShares.Load())
	if r.fromShares.Load() == 0 {
		t.Error("no admission came from a share: the run did not exercise them")
	}
}

// shareNemesis runs the faults of the share runs for duration: kill -9 of
// a node with its shares in hand, a holder cut off while the others spend,
// a clock running ahead or behind, leadership handed over; then heals the
// network.
func shareNemesis(c *testcluster.Cluster, rng *rand.Rand, duration time.Duration) {
	for deadline := time.Now().Add(duration); time.Now().Before(deadline); {
		time.Sleep(time.Duration(200+rng.IntN(300)) * time.Millisecond)
		n := c.Nodes[rng.IntN(len(c.Nodes))]
		switch rng.IntN(4) {
		case 0: // kill -9 a node with its shares in hand
			n.Kill()
			time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
			n.Restart()
		case 1: // cut a holder off while the others spend
			c.Isolate(n)
			time.Sleep(time.Duration(400+rng.IntN(800)) * time.Millisecond)
			c.Net.HealAll()
		case 2: // a clock runs ahead or behind
			n.SetClockSkew(time.Duration(rng.IntN(4000)-2000) * time.Millisecond)
			time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
			n.SetClockSkew(0)
		case 3: // leadership handed over
			if l := leaderOrNil(c); l != nil {
				l.Stop()
				l.Restart()
			}
		}
	}
	c.Net.HealAll()
}

// holder is the caller that holds shares itself in
// TestSharesHoldTheLimitUnderFaults, as the Go client's LocalShares does:
// its shares are asked with its own scope.
const holder = "holder"

// holdShares takes shares of keys through random nodes until stop, spends
// part of each at random moments until its deadline (recording each unit
// at the latest cluster time it may be spent at, as a node's answer from a
// share does), and gives back what is left before the deadline.
func holdShares(t *testing.T, c *testcluster.Cluster, keys []string, stop chan struct{}, record func(key string, at, cost int64), lastShareID *atomic.Uint64) {
	rng := rand.New(rand.NewPCG(21, 23))
	for {
		select {
		case <-stop:
			return
		default:
		}
		key, node := keys[rng.IntN(len(keys))], c.Nodes[rng.IntN(len(c.Nodes))].Node()
		if node == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		check := contract.Check{Key: key, Limit: shareLimits[key], Cost: 1}
		sentAt := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		d, err := node.Allow(ctx, contract.Request{Checks: []contract.Check{check}, Scope: holder, Share: &contract.ShareRequest{Units: 10, TTL: 300 * time.Millisecond}})
		cancel()
		if err != nil || !d.Allowed {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		record(key, d.AtNanos, 1)
		sh := d.Share
		if sh == nil {
			continue
		}
		lastShareID.Store(sh.Token.ID)
		deadline := sentAt.Add(sh.SpendFor)
		left := sh.Units
		for spend := rng.Int64N(sh.Units + 1); spend > 0; spend-- {
			time.Sleep(time.Duration(rng.Int64N(int64(20 * time.Millisecond))))
			now := time.Now()
			if !now.Before(deadline) {
				break
			}
			e := int64(now.Sub(sentAt))
			record(key, d.AtNanos+e+e/100, 1) // cluster time runs at most a hundredth ahead
			left--
		}
		if left == 0 || !time.Now().Before(deadline) {
			continue
		}
		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		_, _ = node.ReturnShare(ctx, contract.ShareReturn{Check: check, Token: sh.Token, Unspent: left, Holder: holder, Background: true})
		cancel()
	}
}

// returnOthersShares gives back, until stop, shares it does not hold: the
// holder's latest share and those around it, by the bare number with a
// secret of its own, under the holder's name and its own. None may give
// anything back.
func returnOthersShares(t *testing.T, c *testcluster.Cluster, keys []string, stop chan struct{}, lastShareID *atomic.Uint64) {
	rng := rand.New(rand.NewPCG(31, 37))
	for {
		select {
		case <-stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
		node := c.Nodes[rng.IntN(len(c.Nodes))].Node()
		if node == nil || lastShareID.Load() == 0 {
			continue
		}
		key := keys[rng.IntN(len(keys))]
		guess := contract.ShareReturn{
			Check:   contract.Check{Key: key, Limit: shareLimits[key]},
			Token:   contract.ShareToken{ID: lastShareID.Load() + uint64(rng.IntN(3)), Secret: contract.NewShareSecret()},
			Unspent: 10,
			Holder:  []string{holder, "stranger"}[rng.IntN(2)],
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		units, err := node.ReturnShare(ctx, guess)
		cancel()
		if units != 0 {
			t.Errorf("a stranger's return of share %d as %q gave back %d units (%v)", guess.Token.ID, guess.Holder, units, err)
		}
	}
}
