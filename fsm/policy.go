package fsm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/limitnode/limitnode/algorithms"
)

// Bounds on policies, part of the HTTP contract (documented in the README).
const (
	MaxPolicies          = 10_000
	MaxOverrides         = 10_000
	MaxPolicyNameBytes   = 128
	MaxDimensions        = 16
	MaxDimensionBytes    = 256
	MaxKeyTemplateBytes  = 512
	maxDimensionNameSize = 64
)

// Policy is a named limit stored in the replicated state, so that it can be
// changed at run time and every node switches at the same log index.
type Policy struct {
	Name  string
	Limit algorithms.Limit
	// Overrides give some keys a limit of their own (a bigger quota for
	// one tenant, say). Sorted by key, keys unique.
	Overrides []Override
	// Shadow makes the policy decide, count and report as usual, but never
	// deny: operators try a limit on live traffic first.
	Shadow bool
	// KeyTemplate, when set, builds the key from the request's dimensions:
	// "{api_key}:{route}" with dimensions api_key and route.
	KeyTemplate string
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
}

// NamedDeleteCommand names the policy to delete.
type NamedDeleteCommand struct {
	Name string
}

// policyEntry is a policy in the FSM. Its limits are allocated once per
// version of the policy, so that buckets can point at the limit their state
// was decided under without a copy per key.
type policyEntry struct {
	policy       Policy
	limit        *algorithms.Limit
	overrides    map[string]*algorithms.Limit
	shadowDenied int64
}

func newPolicyEntry(p Policy) *policyEntry {
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

// ValidatePolicy checks a policy as the FSM will when it is applied. The
// error names the field at fault in the HTTP API's terms.
func ValidatePolicy(p *Policy) *Rejection {
	if err := ValidatePolicyName(p.Name); err != nil {
		return err
	}
	if err := p.Limit.Validate(); err != nil {
		return limitRejection("limit.", err)
	}
	if len(p.Overrides) > MaxOverrides {
		return reject(CodeInvalid, "overrides", "at most %d overrides", MaxOverrides)
	}
	for i, o := range p.Overrides {
		if o.Key == "" || len(o.Key) > MaxKeyBytes {
			return reject(CodeInvalid, "overrides", "override keys must be 1 to %d bytes", MaxKeyBytes)
		}
		if i > 0 && p.Overrides[i-1].Key >= o.Key {
			return reject(CodeInvalid, "overrides", "overrides must be sorted by key, each key once")
		}
		if err := o.Limit.Validate(); err != nil {
			return limitRejection(fmt.Sprintf("overrides[%q].", o.Key), err)
		}
	}
	if p.KeyTemplate != "" {
		if _, err := parseKeyTemplate(p.KeyTemplate); err != nil {
			return err
		}
	}
	return nil
}

// ValidatePolicyName checks a policy name: 1 to 128 bytes of letters,
// digits and "-_.:".
func ValidatePolicyName(name string) *Rejection {
	if name == "" || len(name) > MaxPolicyNameBytes || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r))
	}) >= 0 {
		return reject(CodeInvalid, "name", "a policy name is 1 to %d bytes of letters, digits and -_.:", MaxPolicyNameBytes)
	}
	return nil
}

// templatePart is a literal (name == "") or a placeholder.
type templatePart struct {
	literal string
	name    string
}

// parseKeyTemplate splits "{api_key}:{route}" into literals and placeholders.
// Names are lower-case letters, digits and underscores; braces cannot be
// escaped or nested, and each name appears once.
func parseKeyTemplate(t string) ([]templatePart, *Rejection) {
	bad := func(why string) ([]templatePart, *Rejection) {
		return nil, reject(CodeInvalid, "key_template", "key_template %q: %s", t, why)
	}
	if len(t) > MaxKeyTemplateBytes {
		return bad(fmt.Sprintf("longer than %d bytes", MaxKeyTemplateBytes))
	}
	var parts []templatePart
	var seen []string
	for rest := t; rest != ""; {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			parts = append(parts, templatePart{literal: rest})
			break
		}
		if rest[open] == '}' {
			return bad("a } without its {")
		}
		if open > 0 {
			parts = append(parts, templatePart{literal: rest[:open]})
		}
		closing := strings.IndexAny(rest[open+1:], "{}")
		if closing < 0 || rest[open+1+closing] != '}' {
			return bad("a { without its }")
		}
		name := rest[open+1 : open+1+closing]
		if name == "" || len(name) > maxDimensionNameSize || strings.IndexFunc(name, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
		}) >= 0 {
			return bad(fmt.Sprintf("placeholder {%s} must be 1 to %d of a-z, 0-9 and _", name, maxDimensionNameSize))
		}
		if slices.Contains(seen, name) {
			return bad(fmt.Sprintf("placeholder {%s} appears twice", name))
		}
		seen = append(seen, name)
		parts = append(parts, templatePart{name: name})
		rest = rest[open+1+closing+1:]
	}
	if len(seen) == 0 {
		return bad("it has no {placeholder}")
	}
	if len(seen) > MaxDimensions {
		return bad(fmt.Sprintf("more than %d placeholders", MaxDimensions))
	}
	return parts, nil
}

// validateDimensions checks a request's dimensions on their own: sorted by
// name, each once, within the size limits.
func validateDimensions(dims []Dimension) *Rejection {
	if len(dims) > MaxDimensions {
		return reject(CodeInvalid, "dimensions", "at most %d dimensions", MaxDimensions)
	}
	for i, d := range dims {
		if d.Name == "" || len(d.Name) > maxDimensionNameSize || len(d.Value) > MaxDimensionBytes {
			return reject(CodeInvalid, "dimensions", "dimension names are 1 to %d bytes and values at most %d", maxDimensionNameSize, MaxDimensionBytes)
		}
		if i > 0 && dims[i-1].Name >= d.Name {
			return reject(CodeInvalid, "dimensions", "dimensions must be sorted by name, each once")
		}
	}
	return nil
}

// renderKey fills the template with the dimensions. Every placeholder needs
// a dimension and every dimension a placeholder; the error names the missing
// or unknown ones.
func renderKey(template string, dims []Dimension) (string, *Rejection) {
	parts, err := parseKeyTemplate(template)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var missing []string
	used := 0
	for _, p := range parts {
		if p.name == "" {
			b.WriteString(p.literal)
			continue
		}
		i, found := slices.BinarySearchFunc(dims, p.name, func(d Dimension, name string) int { return strings.Compare(d.Name, name) })
		if !found {
			missing = append(missing, p.name)
			continue
		}
		used++
		b.WriteString(dims[i].Value)
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", reject(CodeInvalid, "dimensions", "missing dimensions for the key template %q: %s", template, strings.Join(missing, ", "))
	}
	if used != len(dims) {
		var unknown []string
		for _, d := range dims {
			if !strings.Contains(template, "{"+d.Name+"}") {
				unknown = append(unknown, d.Name)
			}
		}
		return "", reject(CodeInvalid, "dimensions", "dimensions not in the key template %q: %s", template, strings.Join(unknown, ", "))
	}
	key := b.String()
	if key == "" || len(key) > MaxKeyBytes {
		return "", reject(CodeInvalid, "dimensions", "the key made from the dimensions must be 1 to %d bytes", MaxKeyBytes)
	}
	return key, nil
}
