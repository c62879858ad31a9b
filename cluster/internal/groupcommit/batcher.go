// Package groupcommit is limitnode's group commit: a Batcher gathers the
// requests of many callers into one flush (one Raft entry on the leader,
// one forwarded message on a follower) and answers each call with its own
// results.
package groupcommit

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/prometheus/client_golang/prometheus"
)

// call is one submission to a batcher: requests that travel together and
// are answered together (one caller's request, or one forwarded batch).
type Call struct {
	Requests  []fsm.Request
	load      Load      // what the requests weigh
	submitted time.Time // when it reached the batcher
	Results   []fsm.Result
	Leader    string // ID of the leader whose entry decided, with results
	Err       error
	done      chan struct{}
}

// batcher is limitnode's group commit. Callers submit requests; a single
// loop sends them on through flush, many at a time:
//
//   - when fewer than maxInFlight flushes are under way, what is pending is
//     sent at once, so an idle node adds no latency (no linger timer);
//   - a flush holds the pipeline until it returns: the leader's Raft entry
//     until it is committed and applied, a forward until its answer;
//   - while the pipeline is full, new requests gather and go out together
//     as soon as a flush returns, so under load one Raft entry (or one
//     forwarded message) carries as many requests as arrived meanwhile;
//   - when a flush that answered several callers finishes, the loop yields
//     the processor a few times before the next flush, so callers that ask
//     again at once join it (see loop).
//
// flush must set results (one per request) or err on every call it is
// given.
type Batcher struct {
	flush func(calls []*Call)
	// limit bounds one flush: a Raft entry, or a forwarded message. A call
	// over it goes alone.
	limit       Load
	maxInFlight int
	// maxYields bounds how often the loop yields, after a busy flush, for
	// the callers it answered to come back (see loop); 0 never yields.
	maxYields int
	// waited observes how long each call waited for its flush, and
	// flushing counts the flushes under way, when set.
	waited   prometheus.Observer
	flushing prometheus.Gauge

	submitCh chan *Call
	// doneCh says a flush finished.
	doneCh chan flushed
	stopCh chan struct{}
	wg     sync.WaitGroup

	// mu guards stopped: once it is set nothing more enters submitCh, so
	// stop can fail every call left there.
	mu      sync.RWMutex
	stopped bool
}

// GatherYields is how often a batcher yields, at most, after a busy flush.
// Each yield lets the goroutines that flush just answered run; the loop stops
// early once they are all back or a yield brings nothing new. 16 covers a
// burst of hundreds of callers on two cores; see BenchmarkBatcherClosedLoop.
const GatherYields = 16

// flushed reports a finished flush: how many calls and requests it answered.
type flushed struct{ calls, requests int }

// Metrics are what a batcher reports; either may be nil.
type Metrics struct {
	Waited   prometheus.Observer
	Flushing prometheus.Gauge
}

func New(flush func(calls []*Call), limit Load, maxInFlight, maxYields int, m Metrics) *Batcher {
	b := &Batcher{
		flush:       flush,
		limit:       limit,
		maxInFlight: maxInFlight,
		maxYields:   maxYields,
		waited:      m.Waited,
		flushing:    m.Flushing,
		submitCh:    make(chan *Call, 1024),
		doneCh:      make(chan flushed),
		stopCh:      make(chan struct{}),
	}
	b.wg.Go(b.loop)
	return b
}

// submit hands requests to the batcher and waits for their results and the
// ID of the leader that decided them. If ctx ends first, the requests may
// still be decided: the error then says the outcome is unknown.
func (b *Batcher) Submit(ctx context.Context, requests []fsm.Request) ([]fsm.Result, string, error) {
	c := &Call{Requests: requests, load: LoadOf(requests), submitted: time.Now(), done: make(chan struct{})}
	b.mu.RLock()
	if b.stopped {
		b.mu.RUnlock()
		return nil, "", contract.ErrShutdown
	}
	select {
	case b.submitCh <- c:
		b.mu.RUnlock()
	case <-ctx.Done():
		b.mu.RUnlock()
		return nil, "", contract.ErrNoLeader
	}
	select {
	case <-c.done:
		return c.Results, c.Leader, c.Err
	case <-ctx.Done():
		return nil, "", contract.ErrOutcomeUnknown
	}
}

func (b *Batcher) loop() {
	var pending []*Call
	pendingRequests := 0
	// running counts the flushes under way.
	running := 0
	// take moves what is already queued into pending, without blocking,
	// and reports whether it found anything.
	take := func() bool {
		found := false
		for pendingRequests < b.limit.Requests {
			select {
			case c := <-b.submitCh:
				pending = append(pending, c)
				pendingRequests += len(c.Requests)
				found = true
			default:
				return found
			}
		}
		return found
	}
	for {
		if running < b.maxInFlight && len(pending) > 0 {
			var batch []*Call
			batch, pending = b.next(pending)
			running++
			pendingRequests -= b.startFlush(batch, running)
			continue
		}
		select {
		case c := <-b.submitCh:
			pending = append(pending, c)
			pendingRequests += len(c.Requests)
			take()
		case f := <-b.doneCh:
			running--
			if b.flushing != nil {
				b.flushing.Set(float64(running))
			}
			// Under load (the flush answered several callers, or others
			// waited for it), callers that just got their answers often ask
			// again at once: an embedding service's workers, say. Letting
			// them run before the next flush puts them into it instead of
			// the one after, which would otherwise leave the entries
			// alternating half full. Yielding costs microseconds, not a
			// timer's millisecond, and an idle node never yields.
			if f.calls > 1 || len(pending) > 0 {
				back := pendingRequests + f.requests
				for range b.maxYields {
					runtime.Gosched()
					if !take() || pendingRequests >= back {
						break
					}
				}
			}
		case <-b.stopCh:
			b.shutDown(pending, running)
			return
		}
	}
}

// startFlush flushes batch on a goroutine of its own, running being how
// many flushes run with it, and returns how many requests batch holds.
// The flush reports it ended on doneCh.
func (b *Batcher) startFlush(batch []*Call, running int) int {
	size := 0
	for _, c := range batch {
		size += len(c.Requests)
	}
	if b.flushing != nil {
		b.flushing.Set(float64(running))
	}
	if b.waited != nil {
		now := time.Now()
		for _, c := range batch {
			b.waited.Observe(now.Sub(c.submitted).Seconds())
		}
	}
	b.wg.Go(func() {
		b.flush(batch)
		for _, c := range batch {
			close(c.done)
		}
		b.doneCh <- flushed{calls: len(batch), requests: size}
	})
	return size
}

// shutDown answers every call still pending with ErrShutdown and waits
// for the running flushes to end.
func (b *Batcher) shutDown(pending []*Call, running int) {
	for _, c := range pending {
		c.Err = contract.ErrShutdown
		close(c.done)
	}
	for ; running > 0; running-- {
		<-b.doneCh
	}
}

// next splits pending into the calls of the next flush and those left. It
// takes whole calls (a forwarded batch is never split across entries) up to
// the limit, and at least one however large. Single requests go first, in
// the order they came, then larger calls: a flood of batches cannot make a
// single caller wait behind it for more than one flush.
func (b *Batcher) next(pending []*Call) (batch, rest []*Call) {
	var taken Load
	chosen := make([]bool, len(pending))
	for _, single := range []bool{true, false} {
		for i, c := range pending {
			if (len(c.Requests) == 1) != single || chosen[i] {
				continue
			}
			if len(batch) > 0 && !taken.Plus(c.load).Within(b.limit) {
				continue
			}
			batch = append(batch, c)
			taken = taken.Plus(c.load)
			chosen[i] = true
		}
	}
	for i, c := range pending {
		if !chosen[i] {
			rest = append(rest, c)
		}
	}
	return batch, rest
}

// stop fails pending calls with ErrShutdown, waits for running flushes and
// ends the loop. Calls submitted concurrently with stop also fail.
func (b *Batcher) Stop() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.stopped = true
	b.mu.Unlock()
	close(b.stopCh)
	b.wg.Wait()
	// Calls that reached submitCh after the loop exited.
	for {
		select {
		case c := <-b.submitCh:
			c.Err = contract.ErrShutdown
			close(c.done)
		default:
			return
		}
	}
}
