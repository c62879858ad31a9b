package fsm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

// Envoy rate limit service domains are FSM state: CommandPutRLSConfig
// carries an rls.Config as it is, CommandDeleteRLSConfig a
// NamedDeleteCommand naming the domain. A query (Request.RLS) is matched
// against the domain as it stands at its entry, so a configuration change
// and the decisions around it are ordered by the log on every replica.

// MaxRLSDomains bounds the domains the cluster holds.
const MaxRLSDomains = 1000

// rlsOwnerPrefix marks the buckets of a domain's counters in the bucket
// store: "rls/" + domain, where a policy's buckets carry the policy's name.
// No policy name holds a "/", so the two never meet. Like a policy's, such
// a bucket remembers the limit its state was decided under and is converted
// when the configuration changes the limit.
const rlsOwnerPrefix = "rls/"

// RLSOwner is the owner of a domain's counters, as the bucket store, the
// statistics and the per-policy metrics name it: "rls/" + domain.
func RLSOwner(domain string) string { return rlsOwnerPrefix + domain }

// validBucketOwner reports whether a snapshot's bucket record names an
// owner that can exist: a policy name or an RLS domain.
func validBucketOwner(owner string) bool {
	if domain, ok := strings.CutPrefix(owner, rlsOwnerPrefix); ok {
		return rls.ValidateDomain(domain) == nil
	}
	return contract.ValidatePolicyName(owner) == nil
}

// putRLSConfig stores a domain's configuration, returning a
// *contract.Error (as the apply response) if it is invalid or there are too
// many domains.
func (f *FSM) putRLSConfig(c rls.Config) any {
	d, err := rls.Compile(&c)
	if err != nil {
		return err
	}
	if f.rlsDomains[c.Domain] == nil && len(f.rlsDomains) >= MaxRLSDomains {
		return contract.Invalid("domain", "the cluster holds at most %d rate limit service domains", MaxRLSDomains)
	}
	f.rlsDomains[c.Domain] = d
	return nil
}

// RLSConfig returns a domain's configuration.
func (f *FSM) RLSConfig(domain string) (rls.Config, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.rlsDomains[domain]
	if d == nil {
		return rls.Config{}, false
	}
	return *d.Config(), true
}

// RLSDomains returns the names of the domains configured, sorted.
func (f *FSM) RLSDomains() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.rlsDomains))
	for name := range f.rlsDomains {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// rlsTargets matches a query's descriptors against its domain and resolves
// the limits that apply into targets, appended to targets; statuses has one
// entry per descriptor. Descriptors that count on the same counter under
// the same limit share one target, their hits added (the reference service
// would add both to one counter too).
//
// As envoyproxy/ratelimit does: a descriptor of an unknown domain, or one
// that matches nothing, is not limited; an unlimited rate_limit is not
// limited; a limit whose name another matched limit of the query replaces
// does not apply; a per-descriptor override applies whether or not the
// descriptor matches, with no name and never in shadow mode.
func (f *FSM) rlsTargets(now int64, q *rls.Query, targets []target) ([]target, []rls.Status, *contract.Error) {
	statuses := make([]rls.Status, len(q.Descriptors))
	d := f.rlsDomains[q.Domain]
	if d == nil {
		return targets, statuses, nil
	}
	applying, replaced := rlsLimits(d, q, statuses)
	owner := RLSOwner(q.Domain)
	first := len(targets)
	for i, a := range applying {
		rl := a.rateLimit
		if rl == nil || (rl.Name != "" && slices.Contains(replaced, rl.Name)) {
			continue
		}
		t, err := rlsTarget(q, i, a, owner, statuses[i].Shadow)
		if err != nil {
			return targets, nil, err
		}
		statuses[i].Limited, statuses[i].Algorithm = true, t.limit.Algorithm
		if j := slices.IndexFunc(targets[first:], func(o target) bool { return o.id == t.id }); j >= 0 {
			o := &targets[first+j]
			if *o.limit != *t.limit || o.never != t.never || o.shadow != t.shadow {
				return targets, nil, contract.Invalid(fmt.Sprintf("descriptors[%d]", i), "descriptors count on the same counter under different limits")
			}
			o.cost += t.cost
			statuses[i].Check = j
			continue
		}
		statuses[i].Check = len(targets) - first
		targets = append(targets, t)
	}
	// Looked up once the descriptors that share a counter were merged
	// under the configuration's limit: a counter whose shares were
	// granted under an earlier limit keeps it until they end (adopt).
	for i := range targets[first:] {
		t := &targets[first+i]
		var from algorithms.Limit
		t.slot, t.state, from, t.live = f.buckets.get(t.id)
		t.adopt(from, now)
	}
	return targets, statuses, nil
}

// rlsLimits matches each descriptor of q against the domain d: the limit
// that applies to it (none, for a descriptor that matches nothing or an
// unlimited one), its status so far in statuses, and the names of the
// limits that the matched ones replace.
func rlsLimits(d *rls.Domain, q *rls.Query, statuses []rls.Status) (applying []rlsLimit, replaced []string) {
	applying = make([]rlsLimit, len(q.Descriptors))
	for i := range q.Descriptors {
		desc := &q.Descriptors[i]
		m := d.Match(desc.Entries)
		if desc.Override != nil {
			rl := &rls.RateLimit{RequestsPerUnit: desc.Override.RequestsPerUnit, Unit: desc.Override.Unit}
			if m.RateLimit != nil {
				rl.Algorithm = m.RateLimit.Algorithm
			}
			limit, limited := rls.Limit(rl)
			applying[i] = rlsLimit{rateLimit: rl, limit: limit, limited: limited, override: true, shared: m.Shared}
			statuses[i] = rls.Status{RequestsPerUnit: rl.RequestsPerUnit, Unit: rl.Unit}
			continue
		}
		if m.RateLimit == nil {
			continue
		}
		for _, r := range m.RateLimit.Replaces {
			replaced = append(replaced, r.Name)
		}
		if m.RateLimit.Unlimited {
			statuses[i].Unlimited = true
			continue
		}
		applying[i] = rlsLimit{rateLimit: m.RateLimit, limit: m.Limit, limited: m.Limited, shared: m.Shared, penalty: m.Penalty, shares: m.Shares}
		statuses[i] = rls.Status{Name: m.RateLimit.Name, RequestsPerUnit: m.RateLimit.RequestsPerUnit, Unit: m.RateLimit.Unit,
			Shadow: m.Shadow, Path: m.Path, Metered: m.Metered}
	}
	return applying, replaced
}

// rlsTarget is the counter that descriptor i of q counts on under the limit
// a, owned by owner, before it is looked up in the state.
func rlsTarget(q *rls.Query, i int, a rlsLimit, owner string, shadow bool) (target, *contract.Error) {
	desc := &q.Descriptors[i]
	field := func() string { return fmt.Sprintf("descriptors[%d]", i) } // for errors only
	key := rls.CounterKey(q.Domain, desc.Entries, a.shared)
	if len(key) > contract.MaxKeyBytes {
		return target{}, contract.Invalid(field()+".entries", "the descriptor's entries make a counter key of %d bytes; the most is %d", len(key), contract.MaxKeyBytes)
	}
	t := target{id: bucketKey{key: key, policy: owner}, cost: desc.Hits, shadow: shadow, penalty: a.penalty, shares: a.shares}
	l, rl := a.limit, a.rateLimit
	switch {
	case a.limited && a.override:
		// A request's own limit was not validated with the domain.
		if err := contract.ValidateLimit(l); err != nil {
			return target{}, err.Within(field() + ".limit")
		}
	case a.limited:
		// Compiled and validated when the domain was stored.
	case rl.RequestsPerUnit != 0 || !knownUnit(rl.Unit):
		return target{}, contract.Invalid(field()+".limit", "the limit that applies (%d per %q) cannot be decided", rl.RequestsPerUnit, rl.Unit)
	default:
		// requests_per_unit 0 refuses every hit: a one-unit window
		// that is never consulted stands for it.
		period, _ := rls.UnitPeriod(rl.Unit)
		l = algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 1, Period: period}
		t.never = true
	}
	t.limit = &l
	return t, nil
}

// rlsLimit is the limit that applies to one descriptor of a query: the
// configuration's (compiled when the domain was stored) or the request's
// own override (compiled now), and the wildcard shares of its counter key.
type rlsLimit struct {
	rateLimit *rls.RateLimit
	limit     algorithms.Limit
	limited   bool
	override  bool
	shared    []string
	penalty   *contract.Penalty     // the rate_limit's; an override has none
	shares    *contract.LocalShares // the rate_limit's; an override has none
}

// knownUnit reports whether unit names a period the FSM can decide with.
func knownUnit(unit string) bool {
	period, ok := rls.UnitPeriod(unit)
	return ok && period > 0
}
