package limitcheck

import (
	"testing"

	"github.com/limitnode/limitnode/client"
)

func part(s string) func(string) (string, error) {
	return func(string) (string, error) { return s, nil }
}

// TestJoinNeverMakesOneKeyOfDifferentParts: parts that contain the
// separator or the escape character still give distinct keys.
func TestJoinNeverMakesOneKeyOfDifferentParts(t *testing.T) {
	t.Parallel()
	splits := [][]string{{"a|b", "c"}, {"a", "b|c"}, {"a", "b", "c"}, {`a\`, "b"}, {`a\|b`}, {"a", `\|b`}, {"", "a"}, {"a", ""}}
	seen := map[string][]string{}
	for _, parts := range splits {
		var funcs []func(string) (string, error)
		for _, p := range parts {
			funcs = append(funcs, part(p))
		}
		key, err := Join(funcs...)("")
		if err != nil {
			t.Fatal(err)
		}
		if other, ok := seen[key]; ok {
			t.Fatalf("%q and %q both make %q", parts, other, key)
		}
		seen[key] = parts
	}
}

func TestNewListRefusesBadChecks(t *testing.T) {
	t.Parallel()
	key := part("k")
	limit := &client.Limit{Rate: 1}
	tests := []struct {
		name   string
		checks []Check[string]
	}{
		{"no key", []Check[string]{{Limit: limit}}},
		{"no limit or policy", []Check[string]{{Key: key}}},
		{"both", []Check[string]{{Key: key, Limit: limit, Policy: "p"}}},
		{"negative cost", []Check[string]{{Key: key, Limit: limit, Cost: -1}}},
		{"a name twice", []Check[string]{{Name: "n", Key: key, Limit: limit}, {Name: "n", Key: key, Limit: limit}}},
	}
	for _, tt := range tests {
		if _, err := NewList("Default", tt.checks); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
	l, err := NewList("Default", []Check[string]{{Name: "a", Key: key, Limit: limit}, {Name: "b", Key: key, Policy: "p", Cost: 3}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := l.Request("")
	if err != nil || len(req.Checks) != 2 || req.Checks[0].Cost != 1 || req.Checks[1].Cost != 3 {
		t.Fatalf("request %+v, %v", req, err)
	}
	extra, ok := l.Extra(req, "b", 7)
	if !ok || len(extra.Checks) != 1 || extra.Checks[0].Cost != 7 || req.Checks[1].Cost != 3 || extra.Checks[0].Policy != "p" {
		t.Fatalf("Extra: %+v %v (the request's own cost must stay 3)", extra, ok)
	}
}
