package rls

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// e builds a request descriptor from key, value, key, value...
func e(kv ...string) []Entry {
	if len(kv)%2 != 0 {
		panic("e takes pairs")
	}
	out := make([]Entry, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		out = append(out, Entry{kv[i], kv[i+1]})
	}
	return out
}

// hit is a request descriptor and what it should match, in a form a table
// can spell: limit is "" for no limit, "unlimited", or "N/UNIT".
type hit struct {
	entries  []Entry
	limit    string
	path     string
	shadow   bool
	metered  bool
	shared   []string
	name     string
	replaces []string
}

// summary is what a Match says, as a hit.
func summary(entries []Entry, m Match) hit {
	h := hit{entries: entries, path: m.Path, shadow: m.Shadow, metered: m.Metered, shared: m.Shared}
	if rl := m.RateLimit; rl != nil {
		if rl.Unlimited {
			h.limit = "unlimited"
		} else {
			h.limit = fmt.Sprintf("%d/%s", rl.RequestsPerUnit, rl.Unit)
		}
		h.name = rl.Name
		for _, r := range rl.Replaces {
			h.replaces = append(h.replaces, r.Name)
		}
	}
	return h
}

func (h hit) String() string {
	return fmt.Sprintf("limit=%q path=%q shadow=%v metered=%v shared=%q name=%q replaces=%q",
		h.limit, h.path, h.shadow, h.metered, h.shared, h.name, h.replaces)
}

func sameHit(a, b hit) bool {
	return a.limit == b.limit && a.path == b.path && a.shadow == b.shadow && a.metered == b.metered &&
		slices.Equal(a.shared, b.shared) && a.name == b.name && slices.Equal(a.replaces, b.replaces)
}

// compile parses and compiles a configuration, failing the test on error.
func compile(t testing.TB, yamlText string) *Domain {
	t.Helper()
	c, err := Parse([]byte(yamlText))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	d, err := Compile(&c)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return d
}

// example compiles testdata/examples/exampleN.yaml.
func example(t testing.TB, n int) *Domain {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "examples", fmt.Sprintf("example%d.yaml", n)))
	if err != nil {
		t.Fatal(err)
	}
	return compile(t, string(data))
}

// checkHits matches each hit's entries and compares.
func checkHits(t *testing.T, d *Domain, hits []hit) {
	t.Helper()
	for _, want := range hits {
		got := summary(want.entries, d.Match(want.entries))
		if !sameHit(got, want) {
			t.Errorf("Match(%v):\n got  %v\n want %v", want.entries, got, want)
		}
	}
}

// key is the counter key of a request descriptor under d, or "" when no
// limit applies.
func key(d *Domain, entries []Entry) string {
	m := d.Match(entries)
	if m.RateLimit == nil {
		return ""
	}
	return CounterKey(d.Config().Domain, entries, m.Shared)
}

// applyReplaces drops, from the matches of one request's descriptors, every
// named limit that another matched limit replaces, as the reference's
// constructLimitsToCheck (an unlimited limit also replaces). It returns the
// limits that remain, as hits' limit strings.
func applyReplaces(ms []Match) []string {
	replaced := map[string]bool{}
	for _, m := range ms {
		if m.RateLimit != nil {
			for _, r := range m.RateLimit.Replaces {
				replaced[r.Name] = true
			}
		}
	}
	var out []string
	for _, m := range ms {
		rl := m.RateLimit
		switch {
		case rl == nil:
			out = append(out, "")
		case rl.Name != "" && replaced[rl.Name]:
			out = append(out, "replaced")
		default:
			out = append(out, summary(nil, m).limit)
		}
	}
	return out
}
