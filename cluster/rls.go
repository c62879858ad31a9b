package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/rls"
)

// ShouldRateLimit decides an Envoy rate limit service query: the
// descriptors are matched against the domain's configuration and every
// limit that applies is decided in one Raft entry, all or nothing, through
// the same group commit and forwarding as Allow. A query of one descriptor
// whose rate_limit has local_shares may be admitted from a share this
// node holds instead (Decision.Shared; see shares.go). Errors are Allow's.
func (n *Node) ShouldRateLimit(ctx context.Context, q rls.Query) (rls.Decision, error) {
	if err := q.Validate(); err != nil {
		return rls.Decision{}, err
	}
	results, leader, err := n.decide(ctx, []fsm.Request{{RLS: &q}}, nil)
	if err != nil {
		return rls.Decision{}, err
	}
	r := results[0]
	if r.Rejection != nil {
		return rls.Decision{}, r.Rejection
	}
	d := rls.Decision{Allowed: r.Allowed, AtNanos: r.AtNanos, Leader: leader, Leased: r.Leased, Shared: r.Shared, Descriptors: make([]rls.DescriptorDecision, len(r.RLS))}
	if r.Leased || r.Shared {
		d.Leader = ""
	}
	for i, s := range r.RLS {
		d.Descriptors[i].Status = s
		if s.Limited {
			if s.Check < 0 || s.Check >= len(r.Checks) { // a damaged answer, not the caller's fault
				return rls.Decision{}, fmt.Errorf("cluster: the answer's descriptor %d names check %d of %d", i, s.Check, len(r.Checks))
			}
			c := r.Checks[s.Check]
			d.Descriptors[i].Decision, d.Descriptors[i].Period, d.Descriptors[i].Rate = c.Decision, time.Duration(c.PeriodNanos), c.Rate
			if b := r.Blocked; b != nil && b.Check == s.Check && d.Blocked == nil {
				d.Blocked = &contract.BlockedCheck{Check: i, Block: b.Block}
			}
			if by := r.DeniedBy; by != nil && by.Check == s.Check && d.DeniedBy == nil {
				named := *by
				named.Check = i
				d.DeniedBy = &named
			}
		}
	}
	return d, nil
}

// PutRLSConfig creates or replaces a domain's configuration. Counters of
// descriptors whose limit changes keep their usage, converted to the new
// limit (see algorithms.Convert).
func (n *Node) PutRLSConfig(ctx context.Context, c rls.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	_, err := commandOnLeader[struct{}](ctx, n.route, fsm.CommandPutRLSConfig, &c)
	return err
}

// DeleteRLSConfig deletes a domain's configuration; a *contract.Error with
// CodeNotFound if there is none. Its counters expire as usual.
func (n *Node) DeleteRLSConfig(ctx context.Context, domain string) error {
	if err := rls.ValidateDomain(domain); err != nil {
		return err
	}
	_, err := commandOnLeader[struct{}](ctx, n.route, fsm.CommandDeleteRLSConfig, &fsm.NamedDeleteCommand{Name: domain})
	return err
}

// RLSConfig returns a domain's configuration, after catching up with the
// leader as Policies does.
func (n *Node) RLSConfig(ctx context.Context, domain string) (rls.Config, bool, error) {
	if err := n.route.catchUp(ctx); err != nil {
		return rls.Config{}, false, err
	}
	c, ok := n.fsm.RLSConfig(domain)
	return c, ok, nil
}

// AppliedRLSConfig returns a domain's configuration as this node has
// applied it, without catching up with the leader (RLSConfig does, at the
// cost of a Raft barrier on the leader): for a caller that compares often
// and confirms a difference with RLSConfig before acting on it.
func (n *Node) AppliedRLSConfig(domain string) (rls.Config, bool) {
	return n.fsm.RLSConfig(domain)
}

// RLSDomains returns the names of the configured domains, sorted, after
// catching up with the leader as Policies does.
func (n *Node) RLSDomains(ctx context.Context) ([]string, error) {
	if err := n.route.catchUp(ctx); err != nil {
		return nil, err
	}
	return n.fsm.RLSDomains(), nil
}
