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
	policy    contract.Policy
	limit     *algorithms.Limit
	overrides map[string]*algorithms.Limit
	// placeholders are the key template's names, in template order, for
	// overrides by dimension ("tenant=tenant-42").
	placeholders []string
	shadowDenied int64
	// version is the index of the log entry that put this version of the
	// policy (contract.DeniedBy.PolicyVersion).
	version uint64
}

func newPolicyEntry(p contract.Policy) *policyEntry {
	e := &policyEntry{policy: p, limit: &p.Limit, overrides: make(map[string]*algorithms.Limit, len(p.Overrides))}
	for i := range p.Overrides {
		e.overrides[p.Overrides[i].Key] = &p.Overrides[i].Limit
	}
	if p.KeyTemplate != "" {
		e.placeholders = contract.Placeholders(p.KeyTemplate)
	}
	return e
}

// limitFor returns the limit that applies to the key a check is decided on
// (see contract.Policy.Overrides): the key's own override; else, for a key
// made from dimensions, the override "name=value" of the first placeholder
// of the template whose value has one; else the policy's limit.
func (e *policyEntry) limitFor(key string, dims []contract.Dimension) *algorithms.Limit {
	if l, ok := e.overrides[key]; ok {
		return l
	}
	for _, name := range e.placeholders {
		for _, d := range dims {
			if d.Name != name {
				continue
			}
			if l, ok := e.overrides[name+"="+d.Value]; ok {
				return l
			}
		}
	}
	return e.limit
}

// status is the policy as stored, with its count.
func (e *policyEntry) status() contract.PolicyStatus {
	return contract.PolicyStatus{Policy: e.policy, ShadowDenied: e.shadowDenied, Version: e.version}
}
