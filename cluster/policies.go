package cluster

import (
	"context"
	"slices"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// PutPolicy creates or replaces a policy (its overrides may come in any
// order). Keys limited by an earlier version keep their usage, converted to
// the new limit (see algorithms.Convert).
func (n *Node) PutPolicy(ctx context.Context, p contract.Policy) error {
	p.Overrides = slices.Clone(p.Overrides)
	p.Normalize()
	if err := p.Validate(); err != nil {
		return err
	}
	return n.leaderOp(ctx, &forwardRequest{Op: opPutPolicy, Policy: p}, func() error {
		return n.applyCommand(fsm.CommandPutPolicy, &p)
	})
}

// DeletePolicy deletes a policy; a *contract.Error with CodeNotFound if
// there is none by that name. State of keys it limited expires as usual.
func (n *Node) DeletePolicy(ctx context.Context, name string) error {
	if err := contract.ValidatePolicyName(name); err != nil {
		return err
	}
	return n.leaderOp(ctx, &forwardRequest{Op: opDeletePolicy, Policy: contract.Policy{Name: name}}, func() error {
		return n.applyCommand(fsm.CommandDeletePolicy, &fsm.NamedDeleteCommand{Name: name})
	})
}

// Policies returns up to limit policies named after after, as this node has
// applied them, sorted by name and holding at most maxOverrides overrides
// (at least one policy); next is the name to continue after, or "" at the
// end. A follower may lag the leader by a few entries.
func (n *Node) Policies(after string, limit, maxOverrides int) (page []contract.PolicyStatus, next string) {
	return n.fsm.PoliciesPage(after, limit, maxOverrides)
}

// Policy returns the named policy as this node has applied it.
func (n *Node) Policy(name string) (contract.PolicyStatus, bool) { return n.fsm.Policy(name) }
