package fsm

import (
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// Policies are FSM state: CommandPutPolicy carries a contract.Policy as it
// is, CommandDeletePolicy a NamedDeleteCommand.

// NamedDeleteCommand names the policy to delete.
type NamedDeleteCommand struct {
	Name string
}

// policyEntry is a policy in the FSM. Its limits are allocated once per
// version of the policy, so that buckets can point at the limit their state
// was decided under without a copy per key.
type policyEntry struct {
	policy       contract.Policy
	limit        *algorithms.Limit
	overrides    map[string]*algorithms.Limit
	shadowDenied int64
}

func newPolicyEntry(p contract.Policy) *policyEntry {
	e := &policyEntry{policy: p, limit: &p.Limit, overrides: make(map[string]*algorithms.Limit, len(p.Overrides))}
	for i := range p.Overrides {
		e.overrides[p.Overrides[i].Key] = &p.Overrides[i].Limit
	}
	return e
}

// limitFor returns the limit that applies to key.
func (e *policyEntry) limitFor(key string) *algorithms.Limit {
	if l, ok := e.overrides[key]; ok {
		return l
	}
	return e.limit
}

// status is the policy as stored, with its count.
func (e *policyEntry) status() contract.PolicyStatus {
	return contract.PolicyStatus{Policy: e.policy, ShadowDenied: e.shadowDenied}
}
