package rls

import (
	"fmt"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// Bounds on a query.
const (
	// MaxQueryDescriptors is the most descriptors one query may carry: as
	// many as the checks of one atomic request.
	MaxQueryDescriptors = contract.MaxChecks
	// MaxHits bounds what one descriptor may add (hits_addend).
	MaxHits = algorithms.MaxRate
)

// Query asks for a decision on the descriptors of one rate limit request
// (Envoy's RateLimitRequest). The cluster matches each descriptor against
// the domain's configuration as it stands when the query is applied, and
// decides every limit that applies in one log entry, all or nothing.
type Query struct {
	Domain      string
	Descriptors []QueryDescriptor
}

// QueryDescriptor is one descriptor of a query.
type QueryDescriptor struct {
	Entries []Entry
	// Hits is what the descriptor consumes when the query is allowed; 0
	// checks without consuming.
	Hits int64
	// Override, when set, is the limit to apply instead of the
	// configuration's (Envoy's per-descriptor limit override).
	Override *Override
}

// Override is a limit a request brings for one descriptor: a fixed window
// of RequestsPerUnit per Unit, or the algorithm of the rate_limit the
// descriptor matches in the configuration, if any.
type Override struct {
	RequestsPerUnit uint32
	Unit            string
}

// ValidateDomain checks a domain's name where a request names one: 1 to
// MaxDomainBytes bytes. (A configuration's domain is also checked to be
// single-line text, with the line it stands on.)
func ValidateDomain(domain string) *contract.Error {
	if domain == "" || len(domain) > MaxDomainBytes {
		return contract.Invalid("domain", "domain is required and must be at most %d bytes", MaxDomainBytes)
	}
	return nil
}

// Validate checks a query on its own: the domain, 1 to
// MaxQueryDescriptors descriptors, their entries, hits and overrides.
// Fields are named as the HTTP and gRPC APIs spell them
// ("descriptors[2].entries").
func (q *Query) Validate() *contract.Error {
	if err := ValidateDomain(q.Domain); err != nil {
		return err
	}
	if len(q.Descriptors) == 0 || len(q.Descriptors) > MaxQueryDescriptors {
		return contract.Invalid("descriptors", "descriptors must hold 1 to %d descriptors", MaxQueryDescriptors)
	}
	for i := range q.Descriptors {
		d := &q.Descriptors[i]
		field := fmt.Sprintf("descriptors[%d]", i)
		if err := ValidateEntries(d.Entries); err != nil {
			return err.Within(field)
		}
		if d.Hits < 0 || d.Hits > MaxHits {
			return contract.Invalid(field+".hits_addend", "hits_addend must be from 0 to %d", int64(MaxHits))
		}
		if d.Override != nil {
			if _, ok := UnitPeriod(d.Override.Unit); !ok {
				return contract.Invalid(field+".limit.unit", "unit %q is not one of SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR", d.Override.Unit)
			}
		}
	}
	return nil
}

// Status is how one descriptor of a query was decided.
type Status struct {
	// Limited is true when a limit applied; then Check is the index of its
	// decision among the request's checks. Descriptors that share one
	// counter share one check.
	Limited bool
	Check   int
	// Name, RequestsPerUnit, Unit and Algorithm describe the limit that
	// applied (an override's name is empty).
	Name            string
	RequestsPerUnit uint32
	Unit            string
	Algorithm       algorithms.Algorithm
	// Unlimited is true when the descriptor matched an unlimited rate_limit
	// (whitelisting).
	Unlimited bool
	// Shadow is true when the descriptor's limit is in shadow mode: its
	// decision is reported and counted but never denies the query.
	Shadow bool
	// Path and Metered are Match's: for per-descriptor metrics.
	Path    string
	Metered bool
}

// Decision is the cluster's answer to a query.
type Decision struct {
	// Allowed is true when no limit that is not in shadow mode denied; the
	// hits of every limit were then consumed, and otherwise none was.
	Allowed bool
	// Descriptors has one result per descriptor, in the query's order.
	Descriptors []DescriptorDecision
	// AtNanos is the cluster time of the decision.
	AtNanos int64
	// Leader is the ID of the node that decided ("" for a leased denial).
	Leader string
	// Leased is true for a denial answered from a deny lease, as
	// contract.Decision's.
	Leased bool
	// Shared is true for an admission a node answered from a share of
	// the limit's budget it holds (a rate_limit's local_shares), as
	// contract.Decision's; Leader is then "".
	Shared bool
	// Blocked, for a denial because a descriptor's counter key is
	// blocked, names that descriptor (its index in Descriptors) and the
	// block.
	Blocked *contract.BlockedCheck
	// DeniedBy, for a denial, says what denied it (contract.DeniedBy),
	// its Check the index of the descriptor in Descriptors.
	DeniedBy *contract.DeniedBy
}

// DescriptorDecision is one descriptor's part of a Decision.
type DescriptorDecision struct {
	Status
	// Decision is the limit's decision (zero when no limit applied).
	Decision algorithms.Decision
	// Period is the period of the limit that applied, and Rate its
	// requests per unit.
	Period time.Duration
	Rate   int64
}
