package contract

import (
	"fmt"
	"slices"
	"strings"
)

// templatePart is a literal (name == "") or a placeholder.
type templatePart struct {
	literal string
	name    string
}

// parseKeyTemplate splits "{api_key}:{route}" into literals and placeholders.
// Names are lower-case letters, digits and underscores; braces cannot be
// escaped or nested, and each name appears once.
func parseKeyTemplate(t string) ([]templatePart, *Error) {
	bad := func(why string) ([]templatePart, *Error) {
		return nil, Invalid("key_template", "key_template %q: %s", t, why)
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
		if name == "" || len(name) > MaxDimensionNameBytes || strings.IndexFunc(name, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
		}) >= 0 {
			return bad(fmt.Sprintf("placeholder {%s} must be 1 to %d of a-z, 0-9 and _", name, MaxDimensionNameBytes))
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

// RenderKey fills a key template with dimensions. Every placeholder needs a
// dimension and every dimension a placeholder; the error names the missing
// or unknown ones. The made key must be 1 to MaxKeyBytes bytes.
func RenderKey(template string, dims []Dimension) (string, *Error) {
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
		i := slices.IndexFunc(dims, func(d Dimension) bool { return d.Name == p.name })
		if i < 0 {
			missing = append(missing, p.name)
			continue
		}
		used++
		b.WriteString(dims[i].Value)
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", Invalid("dimensions", "missing dimensions for the key template %q: %s", template, strings.Join(missing, ", "))
	}
	if used != len(dims) {
		var unknown []string
		for _, d := range dims {
			if !strings.Contains(template, "{"+d.Name+"}") {
				unknown = append(unknown, d.Name)
			}
		}
		slices.Sort(unknown)
		return "", Invalid("dimensions", "dimensions not in the key template %q: %s", template, strings.Join(unknown, ", "))
	}
	key := b.String()
	if key == "" || len(key) > MaxKeyBytes {
		return "", Invalid("dimensions", "the key made from the dimensions must be 1 to %d bytes", MaxKeyBytes)
	}
	return key, nil
}

// Placeholders returns the names of a valid key template's placeholders, in
// the template's order ("{tenant}:{route}": tenant, route).
func Placeholders(template string) []string {
	parts, _ := parseKeyTemplate(template)
	var names []string
	for _, p := range parts {
		if p.name != "" {
			names = append(names, p.name)
		}
	}
	return names
}
