package httpapi

import (
	"slices"
	"strconv"
	"strings"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
)

// toLimit validates the limit j; fields are named under prefix ("limit").
func toLimit(j *wire.Limit, prefix string) (algorithms.Limit, *apiError) {
	l, err := contract.LimitSpec{Algorithm: j.Algorithm, Rate: j.Rate, Period: j.Period, Burst: j.Burst}.Limit()
	if err != nil {
		return algorithms.Limit{}, fromContract(err.Within(prefix))
	}
	return l, nil
}

func limitToJSON(l algorithms.Limit) *wire.Limit {
	s := contract.SpecOf(l)
	return &wire.Limit{Algorithm: s.Algorithm, Rate: s.Rate, Period: s.Period, Burst: s.Burst}
}

// toLocalShares validates local_shares j for limit l; nil for nil. Fields
// are named under prefix.
func toLocalShares(j *wire.LocalShares, l algorithms.Limit, prefix string) (*contract.LocalShares, *apiError) {
	if j == nil {
		return nil, nil
	}
	s, err := contract.SharesSpec{TTL: j.TTL, MaxUnits: j.MaxUnits}.LocalShares(l)
	if err != nil {
		return nil, fromContract(err.Within(prefix))
	}
	return s, nil
}

func localSharesToJSON(s *contract.LocalShares) *wire.LocalShares {
	if spec := contract.SpecOfShares(s); spec != nil {
		return &wire.LocalShares{TTL: spec.TTL, MaxUnits: spec.MaxUnits}
	}
	return nil
}

// allowRequest is a decoded /v1/allow body: the contract's request, and
// whether the body gave its one check inline rather than under "checks".
type allowRequest struct {
	contract.Request
	inline bool
	// hold: the node waits out the reservation before it answers.
	hold bool
}

// toRequest turns the body a into the contract's request and validates it.
// Every error names the JSON path at fault.
func toRequest(a *wire.AllowRequest) (allowRequest, *apiError) {
	req := allowRequest{Request: contract.Request{RequestID: a.RequestID}}
	if a.Checks == nil {
		single := wire.Check{Key: a.Key, Limit: a.Limit, Cost: a.Cost, Policy: a.Policy, Dimensions: a.Dimensions}
		c, err := toCheck(&single, "")
		if err != nil {
			return allowRequest{}, err
		}
		req.Checks, req.inline = []contract.Check{c}, true
	} else {
		if a.Key != "" || a.Limit != nil || a.Cost != nil || a.Policy != nil || a.Dimensions != nil {
			return allowRequest{}, invalid("checks", "give either key/limit/policy/cost or checks, not both")
		}
		for i := range a.Checks {
			c, err := toCheck(&a.Checks[i], checkField(i))
			if err != nil {
				return allowRequest{}, err
			}
			req.Checks = append(req.Checks, c)
		}
	}
	maxWait, apiErr := durationField("max_wait", a.MaxWait)
	if apiErr != nil {
		return allowRequest{}, apiErr
	}
	req.MaxWait = maxWait
	if a.Hold && req.MaxWait == 0 {
		return allowRequest{}, invalid("hold", "hold waits out a reservation: give max_wait too")
	}
	if a.Hold {
		// The node waits out no more than MaxHoldWait: a reservation further
		// away is denied, as it would be with that max_wait.
		req.MaxWait = min(req.MaxWait, MaxHoldWait)
	}
	req.hold = a.Hold
	if a.Settle != nil {
		if a.Settle.TTL == nil {
			return allowRequest{}, invalid("settle.ttl", "settle.ttl is required: a Go duration from %s to %s", contract.MinSettleTTL, contract.MaxSettleTTL)
		}
		ttl, apiErr := durationField("settle.ttl", a.Settle.TTL)
		if apiErr != nil {
			return allowRequest{}, apiErr
		}
		if ttl <= 0 {
			return allowRequest{}, invalid("settle.ttl", "settle.ttl must be a Go duration from %s to %s", contract.MinSettleTTL, contract.MaxSettleTTL)
		}
		req.SettleTTL = ttl
	}
	if a.TakeShare != nil {
		share, err := toShareAsk(a.TakeShare)
		if err != nil {
			return allowRequest{}, err
		}
		req.Share = share
	}
	if err := req.Validate(); err != nil {
		return allowRequest{}, req.contractError(err)
	}
	return req, nil
}

// toShareAsk validates take_share.
func toShareAsk(j *wire.ShareAsk) (*contract.ShareRequest, *apiError) {
	if j.Units == nil {
		return nil, invalid("take_share.units", "units is required")
	}
	ttl, err := durationField("take_share.ttl", j.TTL)
	if err != nil {
		return nil, err
	}
	if j.TTL != nil && ttl == 0 {
		return nil, invalid("take_share.ttl", "ttl must be from %s to %s", contract.MinShareTTL, contract.MaxShareTTL)
	}
	return &contract.ShareRequest{Units: *j.Units, TTL: ttl}, nil
}

// contractError answers a refusal of the request, naming fields as the body
// spelled them: a one-check request given inline has its fields at the top
// level, not under "checks[0]".
func (r *allowRequest) contractError(err *contract.Error) *apiError {
	if r.inline {
		e := *err
		if f, ok := strings.CutPrefix(e.Field, checkField(0)); ok {
			e.Field = strings.TrimPrefix(f, ".")
		}
		err = &e
	}
	return fromContract(err)
}

func checkField(i int) string { return "checks[" + strconv.Itoa(i) + "]" }

// toCheck turns one check of the body into the contract's. What the
// contract validates is left to it; this checks what only JSON can get
// wrong: a missing limit, an empty dimensions object. Fields are named under
// prefix.
func toCheck(c *wire.Check, prefix string) (contract.Check, *apiError) {
	out := contract.Check{Key: c.Key, Cost: 1}
	if c.Cost != nil {
		setCost(&out, *c.Cost)
	}
	field := func(name string) string {
		if prefix == "" {
			return name
		}
		return prefix + "." + name
	}
	if c.Policy != nil {
		if err := contract.ValidatePolicyName(*c.Policy); err != nil {
			return contract.Check{}, invalid(field("policy"), "%s", err.Message)
		}
		out.Policy = *c.Policy
	}
	switch {
	case c.Limit != nil:
		l, err := toLimit(c.Limit, field("limit"))
		if err != nil {
			return contract.Check{}, err
		}
		out.Limit = l
		if out.LocalShares, err = toLocalShares(c.Limit.LocalShares, l, field("limit")); err != nil {
			return contract.Check{}, err
		}
	case c.Policy == nil:
		return contract.Check{}, invalid(field("limit"), "limit (or policy) is required")
	}
	if c.Dimensions != nil {
		if len(c.Dimensions) == 0 {
			return contract.Check{}, invalid(field("dimensions"), "dimensions must hold 1 to %d names", contract.MaxDimensions)
		}
		for name, value := range c.Dimensions {
			out.Dimensions = append(out.Dimensions, contract.Dimension{Name: name, Value: value})
		}
		// Sorted, so that the same body makes the same log entry.
		slices.SortFunc(out.Dimensions, func(a, b contract.Dimension) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// setCost sets a check's cost as the API spells it: "cost": 0 is a peek
// (the check consumes nothing), any other cost is consumed when allowed.
func setCost(c *contract.Check, cost int64) {
	c.Cost, c.Peek = cost, cost == 0
}
