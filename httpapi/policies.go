package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/contract"
)

// toPolicy turns the body of a PUT into a policy named name and validates
// it.
func toPolicy(p *wire.Policy, name string) (contract.Policy, *apiError) {
	if p.Name != "" && p.Name != name {
		return contract.Policy{}, invalid("name", "the body names %q but the path %q", p.Name, name)
	}
	if p.ShadowDenied != nil {
		return contract.Policy{}, invalid("shadow_denied", "shadow_denied is counted by the cluster, not set")
	}
	if p.Version != 0 {
		return contract.Policy{}, invalid("version", "version is the log index of the policy's last change, not set")
	}
	if p.Limit == nil {
		return contract.Policy{}, invalid("limit", "limit is required")
	}
	l, err := toLimit(p.Limit, "limit")
	if err != nil {
		return contract.Policy{}, err
	}
	out := contract.Policy{Name: name, Limit: l, Shadow: p.Shadow, KeyTemplate: p.KeyTemplate, MaxDebt: p.MaxDebt}
	if out.LocalShares, err = toLocalShares(p.LocalShares, l, ""); err != nil {
		return contract.Policy{}, err
	}
	if p.Penalty != nil {
		pen, err := contract.PenaltyOf(p.Penalty.Denials, p.Penalty.Within, p.Penalty.BlockFor)
		if err != nil {
			return contract.Policy{}, fromContract(err)
		}
		out.Penalty = pen
	}
	if p.Limit.LocalShares != nil {
		return contract.Policy{}, invalid("limit.local_shares", "a policy's local_shares go on the policy, next to its limit")
	}
	for key, lj := range p.Overrides {
		if lj == nil {
			return contract.Policy{}, invalid(contract.OverrideField(key), "an override needs a limit")
		}
		if lj.LocalShares != nil {
			return contract.Policy{}, invalid(contract.OverrideField(key)+".local_shares", "a policy's local_shares go on the policy, next to its limit")
		}
		ol, err := toLimit(lj, contract.OverrideField(key))
		if err != nil {
			return contract.Policy{}, err
		}
		out.Overrides = append(out.Overrides, contract.Override{Key: key, Limit: ol})
	}
	out.Normalize()
	if err := out.Validate(); err != nil {
		return contract.Policy{}, fromContract(err)
	}
	return out, nil
}

// penaltyToJSON is a policy's penalty as the API spells it.
func penaltyToJSON(p *contract.Penalty) *wire.Penalty {
	if p == nil {
		return nil
	}
	return &wire.Penalty{Denials: p.Denials, Within: p.Within.String(), BlockFor: p.BlockFor.String()}
}

func policyToJSON(p contract.PolicyStatus) wire.Policy {
	out := wire.Policy{Name: p.Name, Limit: limitToJSON(p.Limit), Shadow: p.Shadow, KeyTemplate: p.KeyTemplate, ShadowDenied: &p.ShadowDenied,
		LocalShares: localSharesToJSON(p.LocalShares), Version: p.Version, Penalty: penaltyToJSON(p.Penalty), MaxDebt: p.MaxDebt}
	if len(p.Overrides) > 0 {
		out.Overrides = make(map[string]*wire.Limit, len(p.Overrides))
		for _, o := range p.Overrides {
			out.Overrides[o.Key] = limitToJSON(o.Limit)
		}
	}
	return out
}

// Pages of GET /v1/policies: limit policies (default DefaultPolicyPage, at
// most MaxPolicyPage), cut short at a policy that would bring the page over
// contract.MaxOverrides overrides, so one answer stays a few megabytes.
const (
	DefaultPolicyPage = 100
	MaxPolicyPage     = 1000
)

// listPolicies answers GET /v1/policies?limit=N&after=NAME with a page of
// policies and, when more follow, "next", the name to pass as after.
func (a *API) listPolicies(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := DefaultPolicyPage
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPolicyPage {
			writeError(w, invalid("limit", "limit must be an integer from 1 to %d", MaxPolicyPage))
			return
		}
		limit = n
	}
	page, next, err := a.backend.Policies.Policies(r.Context(), q.Get("after"), limit, contract.MaxOverrides)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	out := wire.PolicyPage{Policies: []wire.Policy{}, Next: next}
	for _, p := range page {
		out.Policies = append(out.Policies, policyToJSON(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) getPolicy(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	p, ok, err := a.backend.Policies.Policy(r.Context(), name)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	if !ok {
		writeError(w, notFound("name", "no policy %q", name))
		return
	}
	writeJSON(w, http.StatusOK, policyToJSON(p))
}

func (a *API) putPolicy(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var body wire.Policy
	if err := decodeJSON(w, r, MaxBatchBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	p, apiErr := toPolicy(&body, name)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	if err := a.backend.Policies.PutPolicy(ctx, p); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	out := policyToJSON(contract.PolicyStatus{Policy: p})
	out.ShadowDenied = nil
	writeJSON(w, http.StatusOK, out)
}

func (a *API) deletePolicy(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	if err := a.backend.Policies.DeletePolicy(ctx, name); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": name})
}

// ParsePolicyFile reads a policy file, {"policies": {"name": {policy}, ...}},
// with the validation of PUT /v1/policies/{name}. The policies come back
// sorted by name.
func ParsePolicyFile(r io.Reader) ([]contract.Policy, error) {
	dec := json.NewDecoder(io.LimitReader(r, MaxBatchBodyBytes+1))
	dec.DisallowUnknownFields()
	var file wire.PolicyFile
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("policy file: data after the JSON object")
	}
	var out []contract.Policy
	for name, pj := range file.Policies {
		if pj == nil {
			return nil, fmt.Errorf("policy file: policy %q is null", name)
		}
		p, err := toPolicy(pj, name)
		if err != nil {
			return nil, fmt.Errorf("policy file: policy %q: %s: %s", name, err.field, err.message)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b contract.Policy) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
