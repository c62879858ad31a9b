package fsm

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

// DedupWindow is how long, in cluster time, the FSM remembers a request ID
// and its first result.
const DedupWindow = 5 * time.Minute

// MaxDedupEntries bounds the request-ID memory. When it is full the oldest ID
// is forgotten first, deterministically, so a flood of IDs cannot exhaust
// memory; an ID forgotten early is the price, and it is documented.
const MaxDedupEntries = 1 << 20

// MaxNowNanos is the latest time (Unix ns, in the year 2160) an entry may
// carry. Past it, a time plus twice the longest bucket fill time
// (algorithms.MaxFillTime) could overflow int64; an entry claiming it is
// corrupt.
const MaxNowNanos = 6e18

// MaxTimeStep is the furthest one entry may move cluster time ahead: ten
// years, longer than any outage a cluster restarts from.
const MaxTimeStep = 10 * 365 * 24 * time.Hour

// maxExpiriesPerApply bounds the idle state one log entry deletes, so that a
// million keys going idle at once do not stall one apply. What is left is
// deleted by the following entries; until then it decides exactly as if it
// were gone (a full bucket).
const maxExpiriesPerApply = 4096

// bucketKey identifies one piece of state: a key under one inline limit
// (the same key under a different limit is a different counter), or a key
// under a named policy, whatever the policy's limit is now (limit is then
// zero, and the bucket remembers the limit its state was decided under).
type bucketKey struct {
	key    string
	policy string
	limit  algorithms.Limit
}

// compare orders bucket keys as less does, for slices.SortFunc.
func (a bucketKey) compare(b bucketKey) int {
	switch {
	case a.less(b):
		return -1
	case b.less(a):
		return 1
	}
	return 0
}

func (a bucketKey) less(b bucketKey) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	if a.policy != b.policy {
		return a.policy < b.policy
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

// FSM is limitnode's replicated state machine: the state of every limited
// key, the request IDs seen recently, and the members' HTTP addresses.
//
// Apply is deterministic: time comes only from the command, and nothing
// depends on map iteration order, so every replica that applies the same log
// holds the same state (Digest returns the same hash on each).
type FSM struct {
	mu         sync.Mutex
	nowNanos   int64
	buckets    *bucketStore
	dedup      map[string]*dedupEntry
	dedupQueue []*dedupEntry // oldest first; dedupHead is the first live one
	dedupHead  int
	nodes      map[string]string
	policies   map[string]*policyEntry
	rlsDomains map[string]*rls.Domain
	// totalOverrides counts the overrides of every policy, bounded by
	// contract.MaxTotalOverrides.
	totalOverrides int
	leases         *leaseTable
	logger         *slog.Logger
	// onStamp, if set, is told the index and cluster time of every applied
	// entry that carries a leader's stamp (allow batches, leases); the
	// node's clock uses it (see cluster's clock.go).
	onStamp func(index uint64, nowNanos int64)
	// onCheckpoint, if set, is given the index of every applied
	// CommandCheckpoint and a function that computes the digest of the
	// state at that index (see OnCheckpoint).
	onCheckpoint func(index uint64, digest func() [32]byte)
	// onAllow, if set, is given every applied allow entry and its
	// response (see OnAllowApplied).
	onAllow func(cmd *AllowCommand, resp *Response)
	// onLeaseEvent and onRestore, if set, are told of waiters leaving
	// their queues and of restored snapshots (see OnLeaseEvents).
	onLeaseEvent func(LeaseEvent)
	onRestore    func()
	// lastIndex is the index of the last log entry applied.
	lastIndex uint64
	// damagedAt is the index of the first sealed entry whose checksum
	// failed, or 0.
	damagedAt uint64
	// Scratch space of decide.
	scratchTargets []target
	scratchStates  []algorithms.State
}

// OnStampApplied registers fn to be called, on the applying goroutine, with
// the index and cluster time of each applied entry that carries a leader's
// stamp. Set it before the FSM is given to Raft.
func (f *FSM) OnStampApplied(fn func(index uint64, nowNanos int64)) { f.onStamp = fn }

// OnCheckpoint registers fn to be called, on the applying goroutine, with
// the index of each applied checkpoint and a function that computes the
// digest of the state as it was at that index. The state is frozen
// copy-on-write, so fn may call digest later, on any goroutine, while
// applies go on. Set it before the FSM is given to Raft.
func (f *FSM) OnCheckpoint(fn func(index uint64, digest func() [32]byte)) { f.onCheckpoint = fn }

// OnAllowApplied registers fn to be called, on the applying goroutine, with
// each applied allow entry and its response, for statistics. fn must not
// block or modify them (the response also goes to the callers). Set it
// before the FSM is given to Raft.
func (f *FSM) OnAllowApplied(fn func(cmd *AllowCommand, resp *Response)) { f.onAllow = fn }

// OnLeaseEvents registers event to be called, on the applying goroutine,
// for each waiter that leaves a lease queue (granted, timed out or
// withdrawn) as entries are applied, and restored after a snapshot replaces
// the state, when events of the entries it covers may have been skipped:
// the caller then looks again with LeaseOf. Neither may block or call into
// the FSM. Set them before the FSM is given to Raft.
func (f *FSM) OnLeaseEvents(event func(LeaseEvent), restored func()) {
	f.onLeaseEvent, f.onRestore = event, restored
}

// Now returns the latest cluster time applied.
func (f *FSM) Now() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nowNanos
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
	f.buckets = newBucketStore()
	f.dedup = make(map[string]*dedupEntry)
	f.dedupQueue = nil
	f.dedupHead = 0
	f.nodes = make(map[string]string)
	f.policies = make(map[string]*policyEntry)
	f.rlsDomains = make(map[string]*rls.Domain)
	f.totalOverrides = 0
	f.leases = newLeaseTable()
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
		f.lastIndex = l.Index
		if l.Type != raft.LogCommand {
			continue
		}
		resp, err := f.applyCommand(l.Data)
		if err != nil {
			f.logger.Error("fsm: refusing log entry", "index", l.Index, "term", l.Term, "err", err)
			if errors.Is(err, errDamaged) && f.damagedAt == 0 {
				f.damagedAt = l.Index
				f.logger.Error("fsm: the log holds a damaged entry; this node's state may differ from the others' from here on", "index", l.Index)
			}
			out[i] = err
			continue
		}
		out[i] = resp
		for _, ev := range f.leases.takeEvents() {
			if f.onLeaseEvent != nil {
				f.onLeaseEvent(ev)
			}
		}
		switch resp.(type) {
		case *Response, *LeaseResult:
			if f.onStamp != nil {
				f.onStamp(l.Index, f.nowNanos)
			}
		}
	}
	return out
}

// ApplyEntry applies one encoded command as the log entry at index, as Raft
// would. Tools that measure the state machine without a cluster use it.
func (f *FSM) ApplyEntry(index uint64, data []byte) any {
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
}

// applyCommands is the dispatch table: one decoder-and-applier per type.
var applyCommands = map[CommandType]func(f *FSM, body []byte) (any, error){
	CommandAllow: func(f *FSM, body []byte) (any, error) {
		var cmd AllowCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if err := f.checkTime(cmd.NowNanos); err != nil {
			return nil, err
		}
		resp := f.applyAllow(&cmd)
		if f.onAllow != nil {
			f.onAllow(&cmd, resp)
		}
		return resp, nil
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
	CommandAcquireLease: func(f *FSM, body []byte) (any, error) {
		return f.applyLease(body, (*leaseTable).acquire)
	},
	CommandRenewLease: func(f *FSM, body []byte) (any, error) {
		return f.applyLease(body, (*leaseTable).renew)
	},
	CommandReleaseLease: func(f *FSM, body []byte) (any, error) {
		return f.applyLease(body, (*leaseTable).release)
	},
	CommandLeaseTick: func(f *FSM, body []byte) (any, error) {
		var cmd LeaseTickCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if err := f.checkTime(cmd.NowNanos); err != nil {
			return nil, err
		}
		return &LeaseResult{AtNanos: f.advance(cmd.NowNanos)}, nil
	},
	CommandCheckpoint: func(f *FSM, body []byte) (any, error) {
		var cmd CheckpointCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if f.onCheckpoint != nil {
			snap := f.copyState()
			f.onCheckpoint(f.lastIndex, func() [32]byte { return snap.digest() })
		}
		return nil, nil
	},
	CommandPutPolicy: func(f *FSM, body []byte) (any, error) {
		var p contract.Policy
		if err := decodeBody(body, &p); err != nil {
			return nil, err
		}
		return f.putPolicy(p), nil
	},
	CommandDeletePolicy: func(f *FSM, body []byte) (any, error) {
		var cmd NamedDeleteCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		old := f.policies[cmd.Name]
		if old == nil {
			return contract.NotFound("name", "policy %q does not exist", cmd.Name), nil
		}
		f.totalOverrides -= len(old.policy.Overrides)
		delete(f.policies, cmd.Name)
		return nil, nil
	},
	CommandPutRLSConfig: func(f *FSM, body []byte) (any, error) {
		var c rls.Config
		if err := decodeBody(body, &c); err != nil {
			return nil, err
		}
		return f.putRLSConfig(c), nil
	},
	CommandDeleteRLSConfig: func(f *FSM, body []byte) (any, error) {
		var cmd NamedDeleteCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if f.rlsDomains[cmd.Name] == nil {
			return contract.NotFound("domain", "rate limit service domain %q does not exist", cmd.Name), nil
		}
		delete(f.rlsDomains, cmd.Name)
		return nil, nil
	},
}

// applyLease runs a lease operation at the command's time.
func (f *FSM) applyLease(body []byte, op func(t *leaseTable, now int64, cmd *LeaseCommand) LeaseResult) (any, error) {
	var cmd LeaseCommand
	if err := decodeBody(body, &cmd); err != nil {
		return nil, err
	}
	if err := f.checkTime(cmd.NowNanos); err != nil {
		return nil, err
	}
	now := f.advance(cmd.NowNanos)
	r := op(f.leases, now, &cmd)
	r.AtNanos = now
	return &r, nil
}

// checkTime refuses an entry's time outside the safe range or too far ahead
// of the cluster's.
func (f *FSM) checkTime(stampNanos int64) error {
	if err := checkStamp(stampNanos); err != nil {
		return err
	}
	return checkStep(stampNanos, f.nowNanos)
}

// advance moves cluster time to max(stamp, last applied) and deletes what
// has expired by then.
func (f *FSM) advance(stampNanos int64) int64 {
	now := max(stampNanos, f.nowNanos)
	f.nowNanos = now
	f.expireBuckets(now)
	f.expireDedup(now)
	f.leases.expire(now, maxExpiriesPerApply)
	return now
}

// putPolicy stores a policy, returning a *contract.Error (as the apply
// response) if it is invalid or there are too many. Keys already limited by
// the policy keep their state; it is converted to the new limit when next
// used.
func (f *FSM) putPolicy(p contract.Policy) any {
	if err := p.Validate(); err != nil {
		return err
	}
	old := f.policies[p.Name]
	if old == nil && len(f.policies) >= contract.MaxPolicies {
		return contract.Invalid("name", "at most %d policies", contract.MaxPolicies)
	}
	total := f.totalOverrides + len(p.Overrides)
	if old != nil {
		total -= len(old.policy.Overrides)
	}
	if total > contract.MaxTotalOverrides {
		return contract.Invalid("overrides", "the cluster holds at most %d overrides over all policies; this policy would bring it to %d", contract.MaxTotalOverrides, total)
	}
	e := newPolicyEntry(p)
	if old != nil {
		e.shadowDenied = old.shadowDenied
	}
	f.policies[p.Name] = e
	f.totalOverrides = total
	return nil
}

func (f *FSM) applyCommand(data []byte) (any, error) {
	data, err := unseal(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCommand, err)
	}
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
	now := f.advance(cmd.NowNanos)

	resp := &Response{Results: make([]Result, len(cmd.Requests))}
	for i := range cmd.Requests {
		req := &cmd.Requests[i]
		if req.RequestID != "" {
			if seen, ok := f.dedup[dedupKey(req.Scope, req.RequestID)]; ok {
				resp.Results[i] = seen.answer(req)
				continue
			}
		}
		resp.Results[i] = f.decide(now, req, cmd)
		resp.Results[i].AtNanos = now
		if req.RequestID != "" && resp.Results[i].Rejection == nil {
			f.remember(&dedupEntry{key: dedupKey(req.Scope, req.RequestID), atNano: now, result: resp.Results[i], fingerprint: fingerprint(req)})
		}
	}
	return resp
}

// target is a check resolved against the state: the bucket it decides on,
// the limit that applies, and the state under that limit.
type target struct {
	id     bucketKey
	slot   uint32 // the bucket's slot, when live
	live   bool
	limit  *algorithms.Limit
	state  algorithms.State
	cost   int64
	key    string // rendered from a template, else ""
	policy *policyEntry
	// shadow: the check's decision never denies the request.
	shadow bool
	// never: the limit refuses every hit (an RLS requests_per_unit of 0).
	never bool
	// maxWait: admit by reservation within it (algorithms.Reserve).
	maxWait int64
}

// resolve finds a check's bucket and limit. A policy check uses the policy
// as it stands at this entry; a bucket whose state was decided under an
// earlier version of the policy has its usage converted to the current one.
func (f *FSM) resolve(now int64, c *Check) (target, *contract.Error) {
	if c.Policy == "" {
		l := c.Limit()
		t := target{id: bucketKey{key: c.Key, limit: l}, limit: &l, cost: c.Cost}
		t.slot, t.state, _, t.live = f.buckets.get(t.id)
		return t, nil
	}
	p := f.policies[c.Policy]
	if p == nil {
		return target{}, contract.NotFound("policy", "policy %q does not exist", c.Policy)
	}
	t := target{cost: c.Cost, policy: p, shadow: p.policy.Shadow}
	key := c.Key
	switch {
	case p.policy.KeyTemplate != "" && len(c.Dimensions) > 0:
		var err *contract.Error
		if key, err = contract.RenderKey(p.policy.KeyTemplate, c.Dimensions); err != nil {
			return target{}, err
		}
		t.key = key
	case len(c.Dimensions) > 0:
		return target{}, contract.Invalid("dimensions", "policy %q has no key_template; give a key", c.Policy)
	case p.policy.KeyTemplate != "":
		return target{}, contract.Invalid("key", "policy %q builds its key from dimensions (key_template %q); give dimensions, not a key", c.Policy, p.policy.KeyTemplate)
	}
	t.id = bucketKey{key: key, policy: c.Policy}
	t.limit = p.limitFor(key, c.Dimensions)
	if err := contract.ValidateCost(*t.limit, c.Cost); err != nil {
		return target{}, err
	}
	var from algorithms.Limit
	if t.slot, t.state, from, t.live = f.buckets.get(t.id); t.live && from != *t.limit {
		t.state = algorithms.Convert(from, t.state, *t.limit, now)
	}
	return t, nil
}

// decide applies one request's checks, or its RLS query's limits,
// all-or-nothing (see decideTargets).
func (f *FSM) decide(now int64, req *Request, cmd *AllowCommand) Result {
	// Scratch space reused across requests (apply is single-threaded):
	// zeroing MaxChecks-sized arrays per request showed in the profile.
	targets, statuses, err := f.targetsOf(now, req, f.scratchTargets[:0])
	defer func() { f.scratchTargets = targets[:0] }()
	if err != nil {
		return Result{Rejection: err}
	}
	res := f.decideTargets(now, targets, cmd)
	res.RLS = statuses
	return res
}

// targetsOf validates req and resolves what it is decided on, appended to
// targets: its checks (inline limits, or policies as they stand at now), or
// its RLS query's limits with one status per descriptor. The error refuses
// the request as it stands.
func (f *FSM) targetsOf(now int64, req *Request, targets []target) ([]target, []rls.Status, *contract.Error) {
	if err := req.Validate(); err != nil {
		return targets, nil, err
	}
	if req.RLS != nil {
		return f.rlsTargets(now, req.RLS, targets)
	}
	for i := range req.Checks {
		t, err := f.resolve(now, &req.Checks[i])
		if err != nil {
			return targets, nil, err.Within(fmt.Sprintf("checks[%d]", i))
		}
		for j := range i {
			if targets[j].id == t.id {
				return targets, nil, contract.Invalid(fmt.Sprintf("checks[%d]", i), "checks %d and %d decide on the same key and limit", j, i)
			}
		}
		if req.MaxWait > 0 && !t.limit.Algorithm.IsBucket() {
			return targets, nil, contract.Invalid("max_wait", "max_wait needs token_bucket, leaky_bucket or gcra; checks[%d] is decided by %s", i, t.limit.Algorithm)
		}
		t.maxWait = req.MaxWait
		targets = append(targets, t)
	}
	return targets, nil, nil
}

// decideTargets decides resolved checks all-or-nothing: each is decided on
// the current state; only if every check that is not in shadow mode allows
// are the new states stored (a shadow check stores only if it allows too).
// When one denies, the others are reported as they stand (decided with cost
// 0), since they consumed nothing.
func (f *FSM) decideTargets(now int64, targets []target, cmd *AllowCommand) Result {
	res := Result{Allowed: true, Checks: make([]CheckResult, len(targets))}
	nextStates := f.scratchStates[:0]
	defer func() { f.scratchStates = nextStates[:0] }()
	for i := range targets {
		t := &targets[i]
		d, next := decideTarget(t, now)
		res.Checks[i] = CheckResult{Decision: d, PeriodNanos: t.limit.PeriodNanos, Key: t.key, Shadow: t.shadow}
		nextStates = append(nextStates, next)
		if !d.Allowed {
			switch {
			case !t.shadow:
				res.Allowed = false
			case t.policy != nil:
				t.policy.shadowDenied++
			}
		}
	}
	storeNew := true
	if res.Allowed && cmd.MaxKeys > 0 {
		created := 0
		for i := range targets {
			if res.Checks[i].Decision.Allowed && targets[i].cost > 0 && !targets[i].live {
				created++
			}
		}
		if created > 0 && int64(f.buckets.len()+created) > cmd.MaxKeys {
			if !cmd.KeyLimitFailOpen {
				return Result{Rejection: contract.Exhausted("the cluster holds its maximum of %d live keys; new keys are refused until old ones expire", cmd.MaxKeys)}
			}
			// Fail open: admit, but keep no state for the new keys.
			storeNew = false
		}
	}
	for i := range targets {
		t := &targets[i]
		d := &res.Checks[i].Decision
		switch {
		case !res.Allowed && d.Allowed:
			// Report what this check would leave if nothing is consumed.
			*d, _ = algorithms.Decide(*t.limit, t.state, now, 0)
		case res.Allowed && d.Allowed && t.cost > 0 && t.live:
			f.buckets.update(t.slot, t.id, *t.limit, nextStates[i])
		case res.Allowed && d.Allowed && t.cost > 0 && storeNew:
			f.buckets.create(t.id, *t.limit, nextStates[i])
		}
	}
	return res
}

// decideTarget decides one resolved check. A check the limit can never
// admit (a limit that refuses everything, or hits beyond its capacity,
// which only an RLS query can ask for) is denied without a change, and
// reported as the state stands, retrying after the state resets.
func decideTarget(t *target, now int64) (algorithms.Decision, algorithms.State) {
	if !t.never && t.cost <= t.limit.Capacity() {
		return algorithms.Reserve(*t.limit, t.state, now, t.cost, t.maxWait)
	}
	d, _ := algorithms.Decide(*t.limit, t.state, now, 0)
	d.Allowed = false
	if t.never {
		d.Limit, d.Remaining, d.RefillAfterNanos = 0, 0, 0
		d.ResetAfterNanos = t.limit.PeriodNanos - now%t.limit.PeriodNanos
	}
	// Retrying cannot help; say so with a wait no shorter than the period.
	d.RetryAfterNanos = max(d.ResetAfterNanos, t.limit.PeriodNanos)
	return d, t.state
}

// expireBuckets deletes state that has become equivalent to no state.
func (f *FSM) expireBuckets(now int64) { f.buckets.expire(now, maxExpiriesPerApply) }

func (f *FSM) remember(e *dedupEntry) {
	if len(f.dedup) >= MaxDedupEntries {
		f.forgetOldestID()
	}
	f.dedup[e.key] = e
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
	delete(f.dedup, e.key)
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

// PoliciesPage returns up to limit policies named after after, sorted by
// name, stopping early once they hold maxOverrides overrides (at least one
// policy); next is the name to continue after, or "" at the end.
func (f *FSM) PoliciesPage(after string, limit, maxOverrides int) (page []contract.PolicyStatus, next string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.policies))
	for name := range f.policies {
		if name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	overrides := 0
	for i, name := range names {
		e := f.policies[name]
		if len(page) == limit || (len(page) > 0 && overrides+len(e.policy.Overrides) > maxOverrides) {
			return page, names[i-1]
		}
		page = append(page, e.status())
		overrides += len(e.policy.Overrides)
	}
	return page, ""
}

// Policy returns the named policy.
func (f *FSM) Policy(name string) (contract.PolicyStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.policies[name]
	if e == nil {
		return contract.PolicyStatus{}, false
	}
	return e.status(), true
}

// NextLeaseDue returns the earliest cluster time at which a lease queue
// changes by time alone, and whether one will: not while nobody waits.
func (f *FSM) NextLeaseDue() (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leases.nextDue()
}

// LeaseOf returns what the state says of a lease ID: held (the result
// Granted, with its expiry), waiting (Queued, with its place), or neither.
func (f *FSM) LeaseOf(id string) LeaseResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, _, _ := f.leases.resultOf(id, f.nowNanos)
	r.AtNanos = f.nowNanos
	return r
}

// Leases returns the leases held on key and the requests waiting for one,
// and the cluster time of the state they are read from.
func (f *FSM) Leases(key string) (int64, []contract.HeldLease, []contract.QueuedLease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nowNanos, f.leases.held(key, f.nowNanos), f.leases.queuedOn(key)
}

// Damaged returns the index of the first entry this FSM refused because its
// checksum failed (a damaged disk), or 0.
func (f *FSM) Damaged() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.damagedAt
}

// Stats describes the size of the state, for status pages and tests.
type Stats struct {
	// Keys is the number of (key, limit) pairs with state.
	Keys int
	// RequestIDs is the number of request IDs remembered.
	RequestIDs int
	// NowNanos is the latest cluster time applied.
	NowNanos int64
	// Leases and LeaseWaiters are the leases held and the requests
	// waiting in lease queues.
	Leases       int
	LeaseWaiters int
}

// Stats returns the current size of the state.
func (f *FSM) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{Keys: f.buckets.len(), RequestIDs: len(f.dedup), NowNanos: f.nowNanos, Leases: len(f.leases.byID), LeaseWaiters: len(f.leases.waiters)}
}
