package fsm

import (
	"fmt"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

// Deciding an entry's allow requests: each request's checks (or its RLS
// query's limits) resolved against the state, then decided all or nothing.

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
			if err := f.refuseNewID(req.Scope, cmd.MaxIDsPerCaller); err != nil {
				resp.Results[i] = Result{Rejection: err, AtNanos: now}
				continue
			}
		}
		if req.Settle != nil {
			if err := f.settles.refuseOpen(req.Scope); err != nil {
				resp.Results[i] = Result{Rejection: err, AtNanos: now}
				continue
			}
		}
		resp.Results[i] = f.decide(now, req, cmd)
		if req.Settle != nil && resp.Results[i].Allowed && resp.Results[i].Rejection == nil {
			f.openReservation(now, req, &resp.Results[i], i)
		}
		if req.Share != nil {
			f.grantShare(now, req, &resp.Results[i], i, cmd)
		}
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
	// penalty: the policy's (or the domain's rate_limit's), counting its
	// denials (see penalty.go).
	penalty *contract.Penalty
	// deferred: the policy's limit (or the domain's) changed, but the
	// bucket keeps the limit its outstanding shares were granted under
	// until they end.
	deferred bool
	// shares: the policy's local_shares, or the RLS rate_limit's; nil
	// without them (and for an inline check, whose ask is its own consent).
	shares *contract.LocalShares
}

// adopt brings the state of a live bucket, decided under limit from, to
// the target's limit: converted (algorithms.Convert), or, while shares
// granted under from are outstanding, left under from (deferred), since
// their holders spend them under it.
func (t *target) adopt(from algorithms.Limit, now int64) {
	switch {
	case !t.live || from == *t.limit:
	case algorithms.SharesLive(t.state, now):
		t.limit, t.deferred = &from, true
	default:
		t.state = algorithms.Convert(from, t.state, *t.limit, now)
	}
}

// resolve finds a check's bucket and limit. A policy check uses the policy
// as it stands at this entry; a bucket whose state was decided under an
// earlier version of the policy has its usage converted to the current one,
// once the shares granted under the earlier one have ended (adopt).
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
	t := target{cost: c.Cost, policy: p, shadow: p.policy.Shadow, penalty: p.policy.Penalty, shares: p.policy.LocalShares}
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
	t.slot, t.state, from, t.live = f.buckets.get(t.id)
	t.adopt(from, now)
	return t, nil
}

// decide applies one request's checks, or its RLS query's limits,
// all-or-nothing, recording what follows (see evaluate).
func (f *FSM) decide(now int64, req *Request, cmd *AllowCommand) Result {
	if err := req.Validate(); err != nil {
		return Result{Rejection: err}
	}
	res, _ := f.evaluate(now, req, cmd, record)
	return res
}

// evaluation says what evaluate does with what it decides.
type evaluation bool

const (
	// record: an admission's new states are stored, and a shadow
	// policy's denials and a penalty's are counted, as applying an entry
	// does.
	record evaluation = true
	// onlyTell: nothing changes; the leader's probe (DenyNow) learns what
	// the state would decide.
	onlyTell evaluation = false
)

// evaluate decides a valid req at now (see decideTargets), recording what
// follows or only telling it, and reports whether the result is a denial
// that counts toward a penalty (which only the log may count). This is the
// one place a request is evaluated: every rule of blocks, shadow checks,
// penalties, how long a denial holds and what denied it is applied here,
// for the log and for the leader's fast denials alike.
func (f *FSM) evaluate(now int64, req *Request, cmd *AllowCommand, mode evaluation) (res Result, penalizing bool) {
	// Scratch space reused across requests (apply is single-threaded):
	// zeroing MaxChecks-sized arrays per request showed in the profile.
	targets, statuses, err := f.targetsOf(now, req, f.scratchTargets[:0])
	defer func() { f.scratchTargets = targets[:0] }()
	if err != nil {
		return Result{Rejection: err}, false
	}
	if i, b := f.blockedTarget(now, targets); b != nil {
		res := f.blockedResult(now, req, targets, i, b)
		res.RLS = statuses
		return res, false
	}
	res = f.decideTargets(now, targets, cmd, mode)
	res.RLS = statuses
	if !res.Allowed && res.Rejection == nil {
		res.DenyAtNanos, res.DenyForNanos = now, denyFor(req, res.Checks)
		res.DeniedBy = f.deniedBy(targets, res.Checks, -1, nil)
		if penalizing = penalized(targets, res.Checks); penalizing {
			// Each such denial must reach the log to be counted.
			res.DenyForNanos = 0
			if mode == record {
				f.penalize(now, targets, &res, req.Scope)
			}
		}
	}
	return res, penalizing
}

// targetsOf resolves what a validated req is decided on, appended to
// targets: its checks (inline limits, or policies as they stand at now), or
// its RLS query's limits with one status per descriptor. The error refuses
// the request as it stands.
func (f *FSM) targetsOf(now int64, req *Request, targets []target) ([]target, []rls.Status, *contract.Error) {
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
			return targets, nil, contract.MaxWaitNeedsABucket(i, len(req.Checks), t.limit.Algorithm)
		}
		t.maxWait = req.MaxWait
		targets = append(targets, t)
	}
	return targets, nil, nil
}

// decideTargets decides resolved checks all-or-nothing: each is decided on
// the current state; only if every check that is not in shadow mode allows
// are the new states stored (a shadow check stores only if it allows too),
// when mode records. When one denies, the others are reported as they
// stand (decided with cost 0), since they consumed nothing.
func (f *FSM) decideTargets(now int64, targets []target, cmd *AllowCommand, mode evaluation) Result {
	res := Result{Allowed: true, Checks: make([]CheckResult, len(targets))}
	nextStates := f.scratchStates[:0]
	defer func() { f.scratchStates = nextStates[:0] }()
	for i := range targets {
		t := &targets[i]
		d, next := decideTarget(t, now)
		res.Checks[i] = CheckResult{Decision: d, PeriodNanos: int64(t.limit.Period), Key: t.key, Shadow: t.shadow, Rate: t.limit.Rate}
		nextStates = append(nextStates, next)
		if !d.Allowed {
			switch {
			case !t.shadow:
				res.Allowed = false
			case t.policy != nil && mode == record:
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
		case mode == onlyTell:
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
		return algorithms.Reserve(*t.limit, t.state, now, t.cost, time.Duration(t.maxWait))
	}
	d, _ := algorithms.Decide(*t.limit, t.state, now, 0)
	d.Allowed = false
	if t.never {
		d.Limit, d.Remaining, d.RefillAfter = 0, 0, 0
		d.ResetAfter = time.Duration(int64(t.limit.Period) - now%int64(t.limit.Period))
	}
	// Retrying cannot help; say so with a wait no shorter than the period.
	d.RetryAfter = max(d.ResetAfter, t.limit.Period)
	return d, t.state
}

// expireBuckets deletes state that has become equivalent to no state.
func (f *FSM) expireBuckets(now int64) { f.buckets.expire(now, maxExpiriesPerApply) }
