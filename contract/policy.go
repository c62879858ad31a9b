package contract

import (
	"fmt"
	"slices"
	"strings"

	"github.com/limitnode/limitnode/algorithms"
)

// Bounds on policies.
const (
	MaxPolicies  = 10_000
	MaxOverrides = 10_000
	// MaxTotalOverrides bounds the overrides of all policies together, so
	// that policy state stays small on every node.
	MaxTotalOverrides   = 100_000
	MaxPolicyNameBytes  = 128
	MaxKeyTemplateBytes = 512
)

// Policy is a named limit stored in the cluster's replicated state, so that
// it can be changed at run time and every node switches at the same log
// index.
type Policy struct {
	Name  string
	Limit algorithms.Limit
	// Overrides give some keys a limit of their own (a bigger quota for
	// one tenant, say). An override applies to the key a check is decided
	// on: the key given, or the key the template made. With a key template,
	// an override may instead name one dimension, "tenant=tenant-42": it
	// applies to every key made with that value. A key's own override wins;
	// among dimension overrides, the one of the template's first
	// placeholder does. Sorted by key, keys unique (Normalize sorts them).
	Overrides []Override
	// Shadow makes the policy decide, count and report as usual, but never
	// deny: operators try a limit on live traffic first.
	Shadow bool
	// KeyTemplate, when set, builds the key from a check's dimensions:
	// "{api_key}:{route}" with dimensions api_key and route.
	KeyTemplate string
	// LocalShares, when set, lets nodes decide the policy's keys from
	// shares of their budget, under the policy's limit and its overrides
	// alike (MaxUnits is bounded by each key's capacity).
	LocalShares *LocalShares
	// Penalty, when set, blocks a key that the policy denies often (see
	// Penalty). Last, as LocalShares.
	Penalty *Penalty
	// MaxDebt is how far beyond empty a settlement that used more than it
	// reserved may charge a key (see SettleRequest): 0 to the limit's
	// capacity, bucket algorithms only. Last, as LocalShares.
	MaxDebt int64
}

// Override is one key's own limit within a policy.
type Override struct {
	Key   string
	Limit algorithms.Limit
}

// PolicyStatus is a policy as stored, with what it has counted.
type PolicyStatus struct {
	Policy
	// ShadowDenied counts the checks the policy would have denied while
	// in shadow mode.
	ShadowDenied int64
	// Version is the log index of the policy's last change.
	Version uint64
}

// Normalize sorts the overrides by key, the order Validate requires and
// the state stores.
func (p *Policy) Normalize() {
	sortOverrides(p.Overrides)
}

func sortOverrides(o []Override) {
	slices.SortFunc(o, func(a, b Override) int { return strings.Compare(a.Key, b.Key) })
}

// Validate checks a policy whole.
func (p *Policy) Validate() *Error {
	if err := ValidatePolicyName(p.Name); err != nil {
		return err
	}
	if err := ValidateLimit(p.Limit); err != nil {
		return err.Within("limit")
	}
	if len(p.Overrides) > MaxOverrides {
		return Invalid("overrides", "at most %d overrides", MaxOverrides)
	}
	for i, o := range p.Overrides {
		if o.Key == "" || len(o.Key) > MaxKeyBytes {
			return Invalid("overrides", "override keys must be 1 to %d bytes", MaxKeyBytes)
		}
		if i > 0 && p.Overrides[i-1].Key >= o.Key {
			return Invalid("overrides", "overrides must be sorted by key, each key once")
		}
		if err := ValidateLimit(o.Limit); err != nil {
			return err.Within(OverrideField(o.Key))
		}
	}
	if p.KeyTemplate != "" {
		if _, err := parseKeyTemplate(p.KeyTemplate); err != nil {
			return err
		}
	}
	if p.Penalty != nil && p.Shadow {
		return Invalid("penalty", "a policy in shadow mode never denies, so it takes no penalty")
	}
	if err := p.Penalty.Validate(); err != nil {
		return err
	}
	if err := ValidateMaxDebt(p.MaxDebt, p.Limit); err != nil {
		return err
	}
	return p.LocalShares.Validate(p.Limit)
}

// OverrideField is the JSON path of one override of a policy.
func OverrideField(key string) string { return fmt.Sprintf("overrides[%q]", key) }

// ValidatePolicyName checks a policy name: 1 to MaxPolicyNameBytes bytes of
// letters, digits and "-_.:".
func ValidatePolicyName(name string) *Error {
	if name == "" || len(name) > MaxPolicyNameBytes || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r))
	}) >= 0 {
		return Invalid("name", "a policy name is 1 to %d bytes of letters, digits and -_.:", MaxPolicyNameBytes)
	}
	return nil
}
