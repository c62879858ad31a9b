package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// recordingFlush answers each request with a result naming it (its
// RequestID in Rejection.Field), counts flushes and requests, and tracks how
// many flushes run at once.
type recordingFlush struct {
	flushes, requests atomic.Int64
	running, maxSeen  atomic.Int64
	largest           atomic.Int64
}

func (r *recordingFlush) flush(calls []*Call) {
	now := r.running.Add(1)
	defer r.running.Add(-1)
	for seen := r.maxSeen.Load(); now > seen && !r.maxSeen.CompareAndSwap(seen, now); seen = r.maxSeen.Load() {
	}
	r.flushes.Add(1)
	size := int64(0)
	for _, c := range calls {
		c.Results = make([]fsm.Result, len(c.Requests))
		for i, req := range c.Requests {
			c.Results[i] = fsm.Result{Rejection: &contract.Error{Field: req.RequestID}}
		}
		size += int64(len(c.Requests))
	}
	r.requests.Add(size)
	for big := r.largest.Load(); size > big && !r.largest.CompareAndSwap(big, size); big = r.largest.Load() {
	}
}

// closedLoop runs callers that each submit rounds calls of perCall
// requests, one after another, and checks every answer is its own.
func closedLoop(t testing.TB, b *Batcher, callers, rounds, perCall int) {
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			for round := range rounds {
				reqs := make([]fsm.Request, perCall)
				for i := range reqs {
					reqs[i].RequestID = fmt.Sprintf("%d/%d/%d", c, round, i)
				}
				results, _, err := b.Submit(context.Background(), reqs)
				if err != nil {
					errs <- err
					return
				}
				if len(results) != perCall {
					errs <- fmt.Errorf("caller %d got %d results for %d requests", c, len(results), perCall)
					return
				}
				for i, r := range results {
					if r.Rejection.Field != reqs[i].RequestID {
						errs <- fmt.Errorf("request %s got the answer to %s", reqs[i].RequestID, r.Rejection.Field)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestBatcherAnswersEveryCallWithItsOwnResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                          string
		maxRequests, maxInFlight      int
		yields, callers, rounds, size int
	}{
		{"one caller", 4096, 1, GatherYields, 1, 50, 1},
		{"many callers", 4096, 1, GatherYields, 32, 50, 1},
		{"without yielding", 4096, 1, 0, 32, 50, 1},
		{"several in flight", 4096, 4, GatherYields, 32, 50, 1},
		{"entries capped small", 8, 1, GatherYields, 32, 50, 3},
		{"a call larger than the cap", 4, 2, GatherYields, 8, 20, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recordingFlush
			b := New(rec.flush, Load{Requests: tt.maxRequests, Checks: 1 << 30, Bytes: 1 << 30}, tt.maxInFlight, tt.yields, Metrics{})
			defer b.Stop()
			closedLoop(t, b, tt.callers, tt.rounds, tt.size)
			if got, want := rec.requests.Load(), int64(tt.callers*tt.rounds*tt.size); got != want {
				t.Errorf("flushed %d requests, want %d", got, want)
			}
			if got := rec.maxSeen.Load(); got > int64(tt.maxInFlight) {
				t.Errorf("%d flushes ran at once, limit %d", got, tt.maxInFlight)
			}
			// A whole call is never split, so a flush exceeds the cap only
			// when it is one call larger than the cap.
			if got := rec.largest.Load(); got > int64(max(tt.maxRequests, tt.size)) {
				t.Errorf("a flush carried %d requests, cap %d", got, tt.maxRequests)
			}
		})
	}
}

func TestBatcherFailsPendingCallsOnStop(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	b := New(func(calls []*Call) {
		started <- struct{}{}
		<-release
		FailAll(calls, errors.New("flushed"))
	}, Load{Requests: 4096, Checks: 8192, Bytes: 1 << 20}, 1, GatherYields, Metrics{})
	first := make(chan error, 1)
	go func() {
		_, _, err := b.Submit(context.Background(), []fsm.Request{{}})
		first <- err
	}()
	<-started // the first call is in flight; the next one must wait
	second := make(chan error, 1)
	go func() {
		_, _, err := b.Submit(context.Background(), []fsm.Request{{}})
		second <- err
	}()
	stopped := make(chan struct{})
	go func() {
		b.Stop()
		close(stopped)
	}()
	close(release)
	<-stopped
	if err := <-first; err == nil || err.Error() != "flushed" {
		t.Errorf("in-flight call: %v, want its flush's error", err)
	}
	if err := <-second; err != nil && !errors.Is(err, contract.ErrShutdown) && err.Error() != "flushed" {
		t.Errorf("pending call: %v, want contract.ErrShutdown or a flush", err)
	}
	if _, _, err := b.Submit(context.Background(), []fsm.Request{{}}); !errors.Is(err, contract.ErrShutdown) {
		t.Errorf("after stop: %v, want contract.ErrShutdown", err)
	}
}

// BenchmarkBatcherClosedLoop measures what a flush carries when callers ask
// again as soon as they are answered, with and without the gathering yields.
// The flush stands in for a Raft entry: it takes a fixed time, during which
// the next callers gather. Without yields the entries alternate between two
// halves of the callers; the requests/flush metric shows it.
func BenchmarkBatcherClosedLoop(b *testing.B) {
	for _, yields := range []int{0, GatherYields} {
		for _, callers := range []int{16, 64, 256} {
			b.Run(fmt.Sprintf("yields=%d/callers=%d", yields, callers), func(b *testing.B) {
				var rec recordingFlush
				flush := func(calls []*Call) {
					spin(20_000) // a stand-in round trip, a few tens of µs
					rec.flush(calls)
				}
				bat := New(flush, Load{Requests: 4096, Checks: 8192, Bytes: 1 << 20}, 1, yields, Metrics{})
				defer bat.Stop()
				rounds := max(b.N/callers, 1)
				b.ResetTimer()
				closedLoop(b, bat, callers, rounds, 1)
				b.StopTimer()
				b.ReportMetric(float64(rec.requests.Load())/float64(rec.flushes.Load()), "requests/flush")
			})
		}
	}
}

var spinSink atomic.Uint64

// spin burns CPU without sleeping, so the benchmark's timing does not
// depend on timer resolution.
func spin(n int) {
	x := uint64(1)
	for i := range n {
		x = x*6364136223846793005 + uint64(i)
	}
	spinSink.Store(x)
}

// TestNextFlushPutsSingleCallsFirstAndKeepsToTheLimit: under a flood of
// batches, a single request that arrived last still goes in the next flush,
// and a flush holds no more checks than the limit (but at least one call).
func TestNextFlushPutsSingleCallsFirstAndKeepsToTheLimit(t *testing.T) {
	t.Parallel()
	batchOf := func(requests, checksEach int) *Call {
		reqs := make([]fsm.Request, requests)
		for i := range reqs {
			reqs[i].Checks = make([]fsm.Check, checksEach)
		}
		return &Call{Requests: reqs, load: LoadOf(reqs)}
	}
	big1, big2, big3 := batchOf(100, 32), batchOf(100, 32), batchOf(100, 32)
	single := batchOf(1, 1)
	tests := []struct {
		name      string
		limit     Load
		pending   []*Call
		wantBatch []*Call
		wantRest  []*Call
	}{
		{"the single goes first, batches fill up to the check limit", Load{Requests: 4096, Checks: 6500, Bytes: 1 << 20}, []*Call{big1, big2, big3, single}, []*Call{single, big1, big2}, []*Call{big3}},
		{"one call over the limit goes alone", Load{Requests: 4096, Checks: 100, Bytes: 1 << 20}, []*Call{big1, big2}, []*Call{big1}, []*Call{big2}},
		{"everything fits", Load{Requests: 4096, Checks: 1 << 20, Bytes: 1 << 20}, []*Call{big1, single}, []*Call{single, big1}, nil},
	}
	for _, tt := range tests {
		b := &Batcher{limit: tt.limit}
		batch, rest := b.next(tt.pending)
		if !slices.Equal(batch, tt.wantBatch) || !slices.Equal(rest, tt.wantRest) {
			t.Errorf("%s: batch of %d, rest of %d calls; want %d and %d", tt.name, len(batch), len(rest), len(tt.wantBatch), len(tt.wantRest))
		}
	}
}

// TestAFlushHoldsThePipelineUntilItReturns: with room for one flush, the
// next waits until the first returns (the leader's entry until it is
// applied); with room for two, the next starts while the first runs.
func TestAFlushHoldsThePipelineUntilItReturns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		maxInFlight             int
		secondStartsBeforeFirst bool
	}{
		{maxInFlight: 1, secondStartsBeforeFirst: false},
		{maxInFlight: 2, secondStartsBeforeFirst: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("maxInFlight=%d", tt.maxInFlight), func(t *testing.T) {
			t.Parallel()
			started := make(chan int, 2)
			finishFirst := make(chan struct{})
			var flushes atomic.Int64
			b := New(func(calls []*Call) {
				n := int(flushes.Add(1))
				started <- n
				if n == 1 {
					<-finishFirst
				}
				for _, c := range calls {
					c.Results = make([]fsm.Result, len(c.Requests))
				}
			}, Load{Requests: 4096, Checks: 8192, Bytes: 1 << 20}, tt.maxInFlight, 0, Metrics{})
			defer b.Stop()
			errs := make(chan error, 2)
			submit := func() {
				_, _, err := b.Submit(context.Background(), []fsm.Request{{}})
				errs <- err
			}
			go submit()
			if n := <-started; n != 1 {
				t.Fatalf("flush %d started first", n)
			}
			go submit()
			answered := 0
			if tt.secondStartsBeforeFirst {
				if n := <-started; n != 2 {
					t.Fatalf("flush %d started second", n)
				}
				if err := <-errs; err != nil {
					t.Fatalf("the second call: %v", err)
				}
				answered++
			} else {
				select {
				case n := <-started:
					t.Fatalf("flush %d started while the first held the pipeline", n)
				case <-time.After(50 * time.Millisecond):
				}
			}
			close(finishFirst)
			for ; answered < 2; answered++ {
				if err := <-errs; err != nil {
					t.Fatalf("a call: %v", err)
				}
			}
		})
	}
}
