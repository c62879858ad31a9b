package fsm

import (
	"container/heap"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/algorithms"
)

// DedupWindow is how long, in cluster time, the FSM remembers a request ID
// and its first result.
const DedupWindow = 5 * time.Minute

// MaxDedupEntries bounds the request-ID memory. When it is full the oldest ID
// is forgotten first, deterministically, so a flood of IDs cannot exhaust
// memory; an ID forgotten early is the price, and it is documented.
const MaxDedupEntries = 1 << 20

// maxExpiriesPerApply bounds the idle state one log entry deletes, so that a
// million keys going idle at once do not stall one apply. What is left is
// deleted by the following entries; until then it decides exactly as if it
// were gone (a full bucket).
const maxExpiriesPerApply = 4096

// bucketKey identifies one piece of state: a key under one limit. The same
// key under a different limit is a different counter.
type bucketKey struct {
	key   string
	limit algorithms.Limit
}

func (a bucketKey) less(b bucketKey) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	la, lb := a.limit, b.limit
	switch {
	case la.Algorithm != lb.Algorithm:
		return la.Algorithm < lb.Algorithm
	case la.Rate != lb.Rate:
		return la.Rate < lb.Rate
	case la.PeriodNanos != lb.PeriodNanos:
		return la.PeriodNanos < lb.PeriodNanos
	default:
		return la.Burst < lb.Burst
	}
}

type bucket struct {
	id        bucketKey
	state     algorithms.State
	expiresAt int64
	heapIndex int
}

// expiryHeap orders buckets by expiry, then by key, so that which buckets an
// apply deletes never depends on insertion history or map order.
type expiryHeap []*bucket

func (h expiryHeap) Len() int { return len(h) }
func (h expiryHeap) Less(i, j int) bool {
	if h[i].expiresAt != h[j].expiresAt {
		return h[i].expiresAt < h[j].expiresAt
	}
	return h[i].id.less(h[j].id)
}
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}
func (h *expiryHeap) Push(x any) {
	b := x.(*bucket)
	b.heapIndex = len(*h)
	*h = append(*h, b)
}
func (h *expiryHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return b
}

type dedupEntry struct {
	id     string
	atNano int64
	result Result
}

// FSM is limitnode's replicated state machine: the state of every limited
// key, the request IDs seen recently, and the members' HTTP addresses.
//
// Apply is deterministic: time comes only from the command, and nothing
// depends on map iteration order, so every replica that applies the same log
// holds the same state and writes byte-identical snapshots.
type FSM struct {
	mu         sync.Mutex
	nowNanos   int64
	buckets    map[bucketKey]*bucket
	expiry     expiryHeap
	dedup      map[string]*dedupEntry
	dedupQueue []*dedupEntry // oldest first; dedupHead is the first live one
	dedupHead  int
	nodes      map[string]string
	logger     *slog.Logger
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// New returns an empty FSM. Corrupt entries are logged to logger.
func New(logger *slog.Logger) *FSM {
	if logger == nil {
		logger = slog.Default()
	}
	f := &FSM{logger: logger}
	f.reset()
	return f
}

func (f *FSM) reset() {
	f.nowNanos = 0
	f.buckets = make(map[bucketKey]*bucket)
	f.expiry = nil
	f.dedup = make(map[string]*dedupEntry)
	f.dedupQueue = nil
	f.dedupHead = 0
	f.nodes = make(map[string]string)
}

// Apply applies one log entry; see ApplyBatch.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed log entries in order and returns one response
// per entry: a *Response for CommandAllow, nil for other commands and for
// entries that are not commands, and an error wrapping ErrCorruptCommand for
// an entry that cannot be decoded (which changes nothing).
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		resp, err := f.applyCommand(l.Data)
		if err != nil {
			f.logger.Error("fsm: refusing log entry", "index", l.Index, "term", l.Term, "err", err)
			out[i] = err
			continue
		}
		out[i] = resp
	}
	return out
}

// applyCommands is the dispatch table: one decoder-and-applier per type.
var applyCommands = map[CommandType]func(f *FSM, body []byte) (any, error){
	CommandAllow: func(f *FSM, body []byte) (any, error) {
		var cmd AllowCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		return f.applyAllow(&cmd), nil
	},
	CommandSetNode: func(f *FSM, body []byte) (any, error) {
		var cmd NodeCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if cmd.ID == "" {
			return nil, fmt.Errorf("node command without an ID")
		}
		f.nodes[cmd.ID] = cmd.HTTPAddr
		return nil, nil
	},
	CommandRemoveNode: func(f *FSM, body []byte) (any, error) {
		var cmd NodeCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		delete(f.nodes, cmd.ID)
		return nil, nil
	},
}

func (f *FSM) applyCommand(data []byte) (any, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty entry", ErrCorruptCommand)
	}
	apply, ok := applyCommands[CommandType(data[0])]
	if !ok {
		return nil, fmt.Errorf("%w: unknown command type %d", ErrCorruptCommand, data[0])
	}
	resp, err := apply(f, data[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: type %d: %w", ErrCorruptCommand, data[0], err)
	}
	return resp, nil
}

func (f *FSM) applyAllow(cmd *AllowCommand) *Response {
	now := max(cmd.NowNanos, f.nowNanos)
	f.nowNanos = now
	f.expireBuckets(now)
	f.expireDedup(now)

	resp := &Response{Results: make([]Result, len(cmd.Requests))}
	for i := range cmd.Requests {
		req := &cmd.Requests[i]
		if req.RequestID != "" {
			if seen, ok := f.dedup[req.RequestID]; ok {
				r := seen.result
				r.Duplicate = true
				resp.Results[i] = r
				continue
			}
		}
		if err := req.validate(); err != nil {
			resp.Results[i] = Result{Error: err.Error()}
			continue
		}
		resp.Results[i] = f.decide(now, req)
		if req.RequestID != "" {
			f.remember(req.RequestID, now, resp.Results[i])
		}
	}
	return resp
}

// decide applies one request's checks all-or-nothing: each is decided on the
// current state; only if all allow are the new states stored. When one
// denies, the others are reported as they stand (decided with cost 0), since
// they consumed nothing.
func (f *FSM) decide(now int64, req *Request) Result {
	res := Result{Allowed: true, Decisions: make([]algorithms.Decision, len(req.Checks))}
	var nextStates [MaxChecks]algorithms.State
	for i, c := range req.Checks {
		l := c.Limit()
		var s algorithms.State
		if b := f.buckets[bucketKey{c.Key, l}]; b != nil {
			s = b.state
		}
		res.Decisions[i], nextStates[i] = algorithms.Decide(l, s, now, c.Cost)
		if !res.Decisions[i].Allowed {
			res.Allowed = false
		}
	}
	if !res.Allowed {
		for i, c := range req.Checks {
			if res.Decisions[i].Allowed {
				var s algorithms.State
				if b := f.buckets[bucketKey{c.Key, c.Limit()}]; b != nil {
					s = b.state
				}
				res.Decisions[i], _ = algorithms.Decide(c.Limit(), s, now, 0)
			}
		}
		return res
	}
	for i, c := range req.Checks {
		if c.Cost > 0 {
			f.store(bucketKey{c.Key, c.Limit()}, nextStates[i])
		}
	}
	return res
}

func (f *FSM) store(id bucketKey, s algorithms.State) {
	expiresAt := id.limit.ExpiresAtNanos(s)
	if b := f.buckets[id]; b != nil {
		b.state = s
		b.expiresAt = expiresAt
		heap.Fix(&f.expiry, b.heapIndex)
		return
	}
	b := &bucket{id: id, state: s, expiresAt: expiresAt}
	f.buckets[id] = b
	heap.Push(&f.expiry, b)
}

// expireBuckets deletes state that has become equivalent to no state.
func (f *FSM) expireBuckets(now int64) {
	for n := 0; n < maxExpiriesPerApply && len(f.expiry) > 0 && f.expiry[0].expiresAt <= now; n++ {
		b := heap.Pop(&f.expiry).(*bucket)
		delete(f.buckets, b.id)
	}
}

func (f *FSM) remember(id string, now int64, r Result) {
	if len(f.dedup) >= MaxDedupEntries {
		f.forgetOldestID()
	}
	e := &dedupEntry{id: id, atNano: now, result: r}
	f.dedup[id] = e
	f.dedupQueue = append(f.dedupQueue, e)
}

func (f *FSM) expireDedup(now int64) {
	for f.dedupHead < len(f.dedupQueue) && f.dedupQueue[f.dedupHead].atNano+int64(DedupWindow) <= now {
		f.forgetOldestID()
	}
}

func (f *FSM) forgetOldestID() {
	e := f.dedupQueue[f.dedupHead]
	f.dedupQueue[f.dedupHead] = nil
	f.dedupHead++
	delete(f.dedup, e.id)
	// Compact once the dead prefix is the larger half, so the queue's
	// memory follows the live IDs.
	if f.dedupHead > len(f.dedupQueue)/2 {
		f.dedupQueue = append([]*dedupEntry(nil), f.dedupQueue[f.dedupHead:]...)
		f.dedupHead = 0
	}
}

// NodeHTTPAddr returns the HTTP address recorded for a member, or "".
func (f *FSM) NodeHTTPAddr(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[id]
}

// Stats describes the size of the state, for status pages and tests.
type Stats struct {
	// Keys is the number of (key, limit) pairs with state.
	Keys int
	// RequestIDs is the number of request IDs remembered.
	RequestIDs int
	// NowNanos is the latest cluster time applied.
	NowNanos int64
}

// Stats returns the current size of the state.
func (f *FSM) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{Keys: len(f.buckets), RequestIDs: len(f.dedup), NowNanos: f.nowNanos}
}
