package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/ratelimitheader"
)

// Coalescing (Options.Coalesce): the client-side twin of the cluster's
// group commit. A call that finds no call of this client in flight is sent
// at once, as /v1/allow; calls that arrive while one is in flight wait for
// it and then go together as one POST /v1/allow/batch, each caller getting
// its own decision. An idle client adds no latency; a busy one sends one
// HTTP call, and the cluster one Raft entry, for many requests.

type coalescer struct {
	c       *Client
	mu      sync.Mutex
	pending []*coalesced
	busy    bool
}

// coalesced is one caller's request waiting for its decision.
type coalesced struct {
	req  AllowRequest
	d    Decision
	err  error
	done chan struct{}
}

// allow queues req and waits for its decision. A caller whose ctx ends
// first gets ctx's error; its request may still be decided, as any call
// abandoned in flight may.
func (k *coalescer) allow(ctx context.Context, req AllowRequest) (Decision, error) {
	p := &coalesced{req: req, done: make(chan struct{})}
	k.mu.Lock()
	k.pending = append(k.pending, p)
	if !k.busy {
		k.busy = true
		go k.run()
	}
	k.mu.Unlock()
	select {
	case <-p.done:
		return p.d, p.err
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
}

// run sends what is pending, one call at a time, until nothing is.
func (k *coalescer) run() {
	for {
		k.mu.Lock()
		n, checks := 0, 0
		for n < len(k.pending) && n < contract.MaxBatchSize {
			c := max(len(k.pending[n].req.Checks), 1)
			if n > 0 && checks+c > contract.MaxBatchChecks {
				break
			}
			checks += c
			n++
		}
		batch := k.pending[:n:n]
		k.pending = k.pending[n:]
		if n == 0 {
			k.pending, k.busy = nil, false
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		k.send(batch)
		for _, p := range batch {
			close(p.done)
		}
	}
}

// coalescedTimeout bounds one coalesced call; the HTTP client's own
// timeout applies too.
const coalescedTimeout = 10 * time.Second

func (k *coalescer) send(batch []*coalesced) {
	ctx, cancel := context.WithTimeout(context.Background(), coalescedTimeout)
	defer cancel()
	if len(batch) == 1 {
		batch[0].d, batch[0].err = k.c.allowOne(ctx, batch[0].req)
		return
	}
	body := wire.BatchRequest{Requests: make([]wire.AllowRequest, len(batch))}
	for i, p := range batch {
		req := p.req.withRequestID()
		body.Requests[i] = req.toWire()
	}
	var out wire.BatchResponse
	a, err := k.c.call(ctx, callSpec{method: http.MethodPost, path: "/v1/allow/batch", in: body, ok: []int{http.StatusOK}})
	receivedAt := time.Now()
	if err == nil {
		err = readBatch(a, len(batch), &out)
	}
	for i, p := range batch {
		if err != nil {
			p.err = err
			continue
		}
		p.d, p.err = batchDecision(out.Responses[i], i, receivedAt)
	}
}

// batchDecision reads one answer of a batch: a decision (status 200 or
// 429) or an *Error naming the request's own fields.
func batchDecision(item wire.BatchItem, i int, receivedAt time.Time) (Decision, error) {
	switch {
	case item.Status != http.StatusOK && item.Status != http.StatusTooManyRequests:
		var e wire.Error
		if item.Error != nil {
			e = *item.Error
		}
		if rest, ok := strings.CutPrefix(e.Field, "requests["+strconv.Itoa(i)+"]"); ok {
			e.Field = strings.TrimPrefix(rest, ".")
		}
		return Decision{}, errorOf(item.Status, e)
	case item.AllowResponse == nil:
		return Decision{}, fmt.Errorf("limitnode: answer %d of a batch has status %d but no decision", i, item.Status)
	}
	d, err := decisionOf(*item.AllowResponse)
	if err != nil {
		return Decision{}, fmt.Errorf("%w: answer %d of a batch: %w", ErrMalformedAnswer, i, err)
	}
	d.ResetAt = resetAt(receivedAt, d.ResetAfter)
	d.StatusCode = item.Status
	d.setHeadersFromFields()
	return d, nil
}

// setHeadersFromFields sets the rate-limit headers (and, when denied,
// RetryAfter) of a decision no node sent headers for, from its fields.
func (d *Decision) setHeadersFromFields() {
	d.Header = http.Header{}
	d.Header.Set("RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
	d.Header.Set("RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
	d.Header.Set("RateLimit-Reset", strconv.FormatInt(ratelimitheader.CeilDiv(inMillis(d.ResetAfter), 1000), 10))
	if !d.Allowed {
		secs := max(ratelimitheader.CeilDiv(inMillis(d.ExactRetryAfter), 1000), 1)
		d.Header.Set("Retry-After", strconv.FormatInt(secs, 10))
		d.RetryAfter = time.Duration(min(secs, int64(MaxRetryAfter/time.Second))) * time.Second
	}
}
