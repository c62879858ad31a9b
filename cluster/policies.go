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
	_, err := commandOnLeader[struct{}](ctx, n, fsm.CommandPutPolicy, &p)
	return err
}

// DeletePolicy deletes a policy; a *contract.Error with CodeNotFound if
// there is none by that name. State of keys it limited expires as usual.
func (n *Node) DeletePolicy(ctx context.Context, name string) error {
	if err := contract.ValidatePolicyName(name); err != nil {
		return err
	}
	_, err := commandOnLeader[struct{}](ctx, n, fsm.CommandDeletePolicy, &fsm.NamedDeleteCommand{Name: name})
	return err
}

// Policies returns up to limit policies named after after, sorted by name
// and holding at most maxOverrides overrides (at least one policy); next is
// the name to continue after, or "" at the end. The node first catches up
// with what the leader had applied (so a read after a write sees it); with
// no leader to ask, it answers from what it has.
func (n *Node) Policies(ctx context.Context, after string, limit, maxOverrides int) (page []contract.PolicyStatus, next string) {
	_ = n.catchUp(ctx)
	return n.fsm.PoliciesPage(after, limit, maxOverrides)
}

// Policy returns the named policy, after catching up as Policies does.
func (n *Node) Policy(ctx context.Context, name string) (contract.PolicyStatus, bool) {
	_ = n.catchUp(ctx)
	return n.fsm.Policy(name)
}
