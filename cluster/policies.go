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
// with every write acknowledged before the call, by the leader's read index
// (readindex.go), so a read after a write sees it on any node; when no
// leader can give one, the error wraps contract.ErrNoLeader.
func (n *Node) Policies(ctx context.Context, after string, limit, maxOverrides int) (page []contract.PolicyStatus, next string, err error) {
	if err := n.catchUp(ctx); err != nil {
		return nil, "", err
	}
	page, next = n.fsm.PoliciesPage(after, limit, maxOverrides)
	return page, next, nil
}

// Policy returns the named policy, after catching up as Policies does.
func (n *Node) Policy(ctx context.Context, name string) (contract.PolicyStatus, bool, error) {
	if err := n.catchUp(ctx); err != nil {
		return contract.PolicyStatus{}, false, err
	}
	p, ok := n.fsm.Policy(name)
	return p, ok, nil
}
