// Package limitcheck is what the net/http middleware and the gRPC
// interceptor share: lists of checks keyed by a call (R: an HTTP request,
// a gRPC call), validated and made ready once, and turned into one
// multi-check request per call.
package limitcheck

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/limitnode/limitnode/client"
)

// ErrNoKey is a key function's error for a call that lacks the part of the
// key it reads (no API key, no authenticated user).
var ErrNoKey = errors.New("the request lacks what its rate limit is keyed by")

// Check is one limit a call is counted against.
type Check[R any] struct {
	Name   string
	Key    func(R) (string, error)
	Limit  *client.Limit
	Policy string
	Cost   int64 // 0 means 1
}

// List is a validated list of checks, decided together.
type List[R any] struct {
	checks []Check[R]
	costs  []int64 // each check's cost, given by address to every request
}

// NewList validates checks (where names the list in errors): each has a
// key, exactly one of Limit and Policy, a cost of at least 0, and a name
// unused by the others.
func NewList[R any](where string, checks []Check[R]) (*List[R], error) {
	l := &List[R]{checks: checks, costs: make([]int64, len(checks))}
	names := map[string]bool{}
	for i, c := range checks {
		switch {
		case c.Key == nil:
			return nil, fmt.Errorf("%s[%d]: Key is required", where, i)
		case (c.Limit == nil) == (c.Policy == ""):
			return nil, fmt.Errorf("%s[%d]: give exactly one of Limit and Policy", where, i)
		case c.Cost < 0:
			return nil, fmt.Errorf("%s[%d]: Cost must not be negative", where, i)
		case c.Name != "" && names[c.Name]:
			return nil, fmt.Errorf("%s[%d]: Name %q is used twice", where, i, c.Name)
		}
		names[c.Name] = true
		l.costs[i] = max(c.Cost, 1)
	}
	return l, nil
}

// Empty reports whether the list holds no check: its calls are not limited.
func (l *List[R]) Empty() bool { return len(l.checks) == 0 }

// Request builds the one multi-check request of call r.
func (l *List[R]) Request(r R) (client.AllowRequest, error) {
	req := client.AllowRequest{Checks: make([]client.Check, len(l.checks))}
	for i, c := range l.checks {
		key, err := c.Key(r)
		if err != nil {
			return client.AllowRequest{}, err
		}
		req.Checks[i] = client.Check{Key: key, Limit: c.Limit, Policy: c.Policy, Cost: l.costs[i]}
	}
	return req, nil
}

// Extra returns the check named name of req (a request this list built),
// to charge extra more against; false if no check has that name.
func (l *List[R]) Extra(req client.AllowRequest, name string, extra int64) (client.AllowRequest, bool) {
	for i, c := range l.checks {
		if c.Name == name {
			check := req.Checks[i]
			check.Cost, check.Peek = extra, extra == 0
			return client.AllowRequest{Checks: []client.Check{check}}, true
		}
	}
	return client.AllowRequest{}, false
}

// Join makes a key function of several parts, in order, separated by "|";
// a "|" or "\" within a part is escaped, so different parts never make one
// key.
func Join[R any](parts ...func(R) (string, error)) func(R) (string, error) {
	return func(r R) (string, error) {
		var b strings.Builder
		for i, part := range parts {
			v, err := part(r)
			if err != nil {
				return "", err
			}
			if i > 0 {
				b.WriteByte('|')
			}
			keyEscaper.WriteString(&b, v)
		}
		return b.String(), nil
	}
}

var keyEscaper = strings.NewReplacer(`\`, `\\`, `|`, `\|`)

// Table is the check lists of a limiter: one per route or method, and a
// default for the rest.
type Table[R any] struct {
	byKey map[string]*List[R]
	dflt  *List[R]
}

// NewTable validates and readies dflt and byKey (named field in errors:
// "Routes", "Methods"), whose checks convert turns into Checks.
func NewTable[R, C any](field string, dflt []C, byKey map[string][]C, convert func(C) Check[R]) (*Table[R], error) {
	list := func(where string, checks []C) (*List[R], error) {
		shared := make([]Check[R], len(checks))
		for i, c := range checks {
			shared[i] = convert(c)
		}
		return NewList(where, shared)
	}
	t := &Table[R]{byKey: map[string]*List[R]{}}
	var err error
	if t.dflt, err = list("Default", dflt); err != nil {
		return nil, err
	}
	for key, checks := range byKey {
		if t.byKey[key], err = list(fmt.Sprintf("%s[%q]", field, key), checks); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// OneCostEach refuses a table with a list whose checks cost differently
// (named field in errors): a settlement charges one cost up front on
// every check of a request, and settles each with the same.
func (t *Table[R]) OneCostEach(field string) error {
	check := func(where string, l *List[R]) error {
		for i, c := range l.costs {
			if c != l.costs[0] {
				return fmt.Errorf("%s[%d]: with settling, every check of a list costs the same; it costs %d, the first %d", where, i, c, l.costs[0])
			}
		}
		return nil
	}
	if err := check("Default", t.dflt); err != nil {
		return err
	}
	for _, key := range slices.Sorted(maps.Keys(t.byKey)) {
		if err := check(fmt.Sprintf("%s[%q]", field, key), t.byKey[key]); err != nil {
			return err
		}
	}
	return nil
}

// Lookup returns the checks of key, or the default ones.
func (t *Table[R]) Lookup(key string) *List[R] {
	if l, ok := t.byKey[key]; ok {
		return l
	}
	return t.dflt
}
