package faulttest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/testcluster"
)

// shareLimits are the keys of TestSharesHoldTheLimitUnderFaults: limits
// the clients ask more of than they give, so that shares are granted from
// what refills all along the run, and the holders spend to the last unit.
var shareLimits = map[string]algorithms.Limit{
	"shared-tb":  {Algorithm: algorithms.TokenBucket, Rate: 100, PeriodNanos: int64(time.Second), Burst: 50},
	"shared-fw":  {Algorithm: algorithms.FixedWindow, Rate: 100, PeriodNanos: int64(time.Second)},
	"shared-log": {Algorithm: algorithms.SlidingWindowLog, Rate: 100, PeriodNanos: int64(time.Second)},
}

type stamped struct{ at, cost int64 }

// overTheLimit returns how the admissions (at the cluster time each answer
// gives, which for an answer from a share is no earlier than the true one
// and no later than the share's end) break l, or "". The bucket's bound
// over [a, b] is burst + rate × (b − a); the fixed window's, rate a
// window; the log's, rate in any period.
func overTheLimit(l algorithms.Limit, adm []stamped) string {
	slices.SortFunc(adm, func(a, b stamped) int { return cmp.Compare(a.at, b.at) })
	for i := range adm {
		var sum int64
		for j := i; j < len(adm); j++ {
			span := adm[j].at - adm[i].at
			if !l.Algorithm.IsBucket() && span >= l.PeriodNanos {
				break
			}
			if l.Algorithm == algorithms.FixedWindow && adm[j].at/l.PeriodNanos != adm[i].at/l.PeriodNanos {
				break
			}
			sum += adm[j].cost
			bound := l.Rate
			if l.Algorithm.IsBucket() {
				bound = l.Burst + span*l.Rate/l.PeriodNanos
			}
			if sum > bound {
				return fmt.Sprintf("%d admitted from %d to %d, over %d", sum, adm[i].at, adm[j].at, bound)
			}
		}
	}
	return ""
}

// TestSharesHoldTheLimitUnderFaults spends keys with local shares through
// every node, several times their budget, while the nemesis kills nodes
// holding shares (kill -9: their unspent units are lost, never doubled),
// cuts nodes off (a holder cut off keeps spending its share until it ends,
// and not after), skews clocks and hands leadership over. What was
// acknowledged as admitted, on every node together, must stay within each
// key's limit, over every interval.
func TestSharesHoldTheLimitUnderFaults(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitConverged()
	shares := &contract.LocalShares{TTLNanos: int64(300 * time.Millisecond)}
	keys := []string{"shared-tb", "shared-fw", "shared-log"}
	var mu sync.Mutex
	admitted := map[string][]stamped{}
	var fromShares atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for client := range 9 {
		rng := rand.New(rand.NewPCG(uint64(client), 3))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				k, node := rng.IntN(len(keys)), c.Nodes[rng.IntN(len(c.Nodes))].Node()
				if node == nil { // down
					time.Sleep(5 * time.Millisecond)
					continue
				}
				req := contract.Request{Checks: []contract.Check{{Key: keys[k], Limit: shareLimits[keys[k]], Cost: 1 + rng.Int64N(3), LocalShares: shares}}}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(20+rng.IntN(500))*time.Millisecond)
				d, err := node.Allow(ctx, req)
				cancel()
				if err == nil && d.Allowed {
					mu.Lock()
					admitted[keys[k]] = append(admitted[keys[k]], stamped{d.AtNanos, req.Checks[0].Cost})
					mu.Unlock()
					if d.Shared {
						fromShares.Add(1)
					}
				}
				if err != nil {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(11, 13))
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); {
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
	close(stop)
	wg.Wait()
	for _, key := range keys {
		if over := overTheLimit(shareLimits[key], admitted[key]); over != "" {
			t.Errorf("%s: %s", key, over)
		}
		t.Logf("%s: %d admissions", key, len(admitted[key]))
	}
	t.Logf("%d answered from shares", fromShares.Load())
	if fromShares.Load() == 0 {
		t.Error("no admission came from a share: the run did not exercise them")
	}
}
