package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/testcluster"
)

// BenchmarkLeaseTurns measures turns at one slot on a 3-node cluster, each
// turn a lease taken through a follower's Go API and given back at once.
// With one caller the slot is always free: an acquire and a release, two
// entries, the baseline. With four, the callers find it held and wait in
// its queue, each turn a hand-off: the acquire that queues, the release
// whose entry grants the first waiter, and the waiter's claim.
func BenchmarkLeaseTurns(b *testing.B) {
	c := testcluster.Start(b, 3)
	followers := c.Followers()
	for _, callers := range []int{1, 4} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			req := contract.LeaseRequest{Key: fmt.Sprintf("turns-%d", callers), Max: 1, TTL: time.Minute, MaxWait: time.Minute, MaxQueue: int64(callers)}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range callers {
				wg.Go(func() {
					node := followers[w%len(followers)].Node()
					for next.Add(1) <= int64(b.N) {
						l, err := node.AcquireLease(context.Background(), req)
						if err == nil && !l.Granted {
							err = fmt.Errorf("refused: %+v", l)
						}
						if err == nil {
							_, err = node.ReleaseLease(context.Background(), l.ID)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
		})
	}
}
