package rls

import (
	"fmt"
	"strings"

	"github.com/limitnode/limitnode/algorithms"

	"github.com/limitnode/limitnode/contract"
)

// Entry is one (key, value) pair of a request descriptor.
type Entry struct {
	// Key is compared exactly with a configured descriptor's key.
	Key string
	// Value is compared with a configured value or wildcard pattern; "" is
	// matched by a descriptor without a value, or by a pattern such as "*".
	Value string
}

// ValidateEntries checks a request descriptor: 1 to MaxDepth entries, each
// with a key of 1 to MaxKeyBytes bytes and a value of at most MaxValueBytes
// bytes. The field is "entries", or "entries[i].key" / "entries[i].value".
func ValidateEntries(entries []Entry) *contract.Error {
	switch {
	case len(entries) == 0:
		return contract.Invalid("entries", "a descriptor needs at least one entry")
	case len(entries) > MaxDepth:
		return contract.Invalid("entries", "a descriptor has at most %d entries; this one has %d", MaxDepth, len(entries))
	}
	for i, e := range entries {
		switch {
		case e.Key == "":
			return contract.Invalid(fmt.Sprintf("entries[%d].key", i), "key is required")
		case len(e.Key) > MaxKeyBytes:
			return contract.Invalid(fmt.Sprintf("entries[%d].key", i), "key is %d bytes; at most %d", len(e.Key), MaxKeyBytes)
		case len(e.Value) > MaxValueBytes:
			return contract.Invalid(fmt.Sprintf("entries[%d].value", i), "value is %d bytes; at most %d", len(e.Value), MaxValueBytes)
		}
	}
	return nil
}

// Match is what a request descriptor (its entries, in order) matched.
type Match struct {
	// RateLimit is the rate_limit that applies, shared with the Domain: do
	// not modify it. nil when none applies: no descriptor matched, or the
	// match did not end at the request's last entry (a request deeper or
	// shallower than the configuration), or the descriptor matched has no
	// rate_limit. The other fields are zero then.
	RateLimit *RateLimit
	// Shadow is the matched descriptor's shadow_mode.
	Shadow bool
	// Path names the matched descriptor for metrics. It is built from the
	// configuration, never from request values, so a configuration has
	// a bounded number of them: each level is the descriptor's key, and
	// "_" and its value when it has one (a wildcard's pattern), joined by
	// ".": "key1_value1.key2", "path_/foo*". It is the reference's stats
	// key without the domain.
	Path string
	// Metered is true when the limit has a name or the descriptor has
	// detailed_metric: only such limits get per-descriptor metrics.
	Metered bool
	// Limit is what RateLimit decides with (the Limit function of it,
	// computed once when the domain was compiled, and valid); Limited is
	// false when it decides nothing: unlimited, or requests_per_unit 0.
	Limit   algorithms.Limit
	Limited bool
	// Penalty is the rate_limit's penalty, compiled; nil without one.
	Penalty *contract.Penalty
	// Shares is the rate_limit's local_shares, compiled against Limit;
	// nil without them. Shared with the Domain: do not modify it.
	Shares *contract.LocalShares
	// Shared, when not nil, has one element per entry; Shared[i], when not
	// "", is the wildcard pattern that stands for entry i's value in the
	// counter key (CounterKey): the entry was matched by a share_threshold
	// wildcard, so every value the pattern matches counts on one counter.
	Shared []string
}

// Domain is a compiled configuration, ready to match. It is immutable and
// safe for concurrent use.
type Domain struct {
	config *Config
	root   level
	shares bool // a rate_limit of it has local_shares
}

// HasShares reports whether a rate_limit of the domain has local_shares.
func (d *Domain) HasShares() bool { return d.shares }

// hasShares reports whether a rate_limit of ds, or of the descriptors
// they nest, has local_shares.
func hasShares(ds []Descriptor) bool {
	for i := range ds {
		if rl := ds[i].RateLimit; rl != nil && rl.LocalShares != nil || hasShares(ds[i].Descriptors) {
			return true
		}
	}
	return false
}

// level is one list of descriptors, indexed for matching.
type level struct {
	// exact holds the descriptors with a value, by key and value. A
	// wildcard value is here too: a request value equal to the pattern
	// matches it exactly, as in the reference.
	exact map[levelKey]*node
	// wildcards holds, by key, the descriptors whose value holds '*', in
	// configuration order.
	wildcards map[string][]*node
	// keyOnly holds the descriptors without a value, by key.
	keyOnly map[string]*node
}

// node is one compiled descriptor.
type node struct {
	value     string
	parts     []string // value split on '*', for a wildcard
	rateLimit *RateLimit
	limit     algorithms.Limit // Limit(rateLimit), when limited
	limited   bool
	penalty   *contract.Penalty // of rateLimit, compiled
	shares    *contract.LocalShares
	shadow    bool
	metered   bool
	share     bool // share_threshold on a wildcard
	path      string
	children  level
}

func (l *level) empty() bool {
	return len(l.exact) == 0 && len(l.wildcards) == 0 && len(l.keyOnly) == 0
}

// Compile validates c (Validate) and builds its matcher. The Domain keeps a
// copy of c, with units in upper case: later changes to c do not reach it.
func Compile(c *Config) (*Domain, *contract.Error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	d := &Domain{config: &Config{Domain: c.Domain, Descriptors: copyDescriptors(c.Descriptors)}}
	d.root = compileLevel(d.config.Descriptors, "")
	d.shares = hasShares(d.config.Descriptors)
	return d, nil
}

// Config is the configuration d was compiled from (a copy, units in upper
// case). It is shared: do not modify it.
func (d *Domain) Config() *Config { return d.config }

func copyDescriptors(ds []Descriptor) []Descriptor {
	if ds == nil {
		return nil
	}
	out := make([]Descriptor, len(ds))
	for i, d := range ds {
		out[i] = d
		if d.RateLimit != nil {
			rl := *d.RateLimit
			rl.Unit = canonicalUnit(rl.Unit)
			if rl.Replaces != nil {
				rl.Replaces = append([]Replace(nil), rl.Replaces...)
			}
			if rl.Burst != nil {
				b := *rl.Burst
				rl.Burst = &b
			}
			if rl.LocalShares != nil {
				ls := *rl.LocalShares
				if ls.MaxUnits != nil {
					units := *ls.MaxUnits
					ls.MaxUnits = &units
				}
				rl.LocalShares = &ls
			}
			out[i].RateLimit = &rl
		}
		out[i].Descriptors = copyDescriptors(d.Descriptors)
	}
	return out
}

func compileLevel(ds []Descriptor, parentPath string) level {
	var l level
	for i := range ds {
		d := &ds[i]
		path := d.Key
		if d.Value != "" {
			path += "_" + d.Value
		}
		if parentPath != "" {
			path = parentPath + "." + path
		}
		n := &node{
			value:     d.Value,
			rateLimit: d.RateLimit,
			shadow:    d.ShadowMode,
			metered:   d.RateLimit != nil && (d.RateLimit.Name != "" || d.DetailedMetric),
			path:      path,
			children:  compileLevel(d.Descriptors, path),
		}
		n.limit, n.limited = Limit(d.RateLimit)
		if d.RateLimit != nil {
			n.penalty, _ = penaltyOf(d.RateLimit.Penalty) // validated with the configuration
			n.shares, _ = sharesOf(d.RateLimit.LocalShares, n.limit)
		}
		switch {
		case d.Value == "":
			if l.keyOnly == nil {
				l.keyOnly = make(map[string]*node)
			}
			l.keyOnly[d.Key] = n
		default:
			if l.exact == nil {
				l.exact = make(map[levelKey]*node)
			}
			l.exact[levelKey{d.Key, d.Value}] = n
			if strings.Contains(d.Value, "*") {
				n.parts = strings.Split(d.Value, "*")
				n.share = d.ShareThreshold
				if l.wildcards == nil {
					l.wildcards = make(map[string][]*node)
				}
				l.wildcards[d.Key] = append(l.wildcards[d.Key], n)
			}
		}
	}
	return l
}

// find is the descriptor of the level that entry e matches, and whether it
// matched through a wildcard pattern: the exact key and value first, then
// the key's wildcards in configuration order, then the key alone.
func (l *level) find(e Entry) (n *node, wildcard bool) {
	if e.Value != "" {
		if n := l.exact[levelKey{e.Key, e.Value}]; n != nil {
			return n, false
		}
	}
	for _, n := range l.wildcards[e.Key] {
		if wildcardMatch(n.parts, e.Value) {
			return n, true
		}
	}
	return l.keyOnly[e.Key], false
}

// wildcardMatch reports whether value matches the pattern split on '*' into
// parts (at least two): it starts with the first part, ends with the last,
// and holds the others in order between them, each '*' standing for zero or
// more bytes.
func wildcardMatch(parts []string, value string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// Match finds the rate limit that applies to a request descriptor, as the
// reference's GetLimit: each entry is looked up in the level the previous
// one led to (an exact key and value, then the level's wildcards for the
// key in configuration order, then the key alone); the rate_limit of the
// descriptor matched by the last entry applies. A limit met before the last
// entry does not apply, and the match stops, with no limit, at an entry
// that matches nothing or at a descriptor without nested ones while entries
// remain. An empty descriptor matches nothing.
//
// Match allocates only Shared, and only when a share_threshold wildcard was
// matched.
func (d *Domain) Match(entries []Entry) Match {
	l := &d.root
	var shared []string
	for i, e := range entries {
		n, wildcard := l.find(e)
		if n == nil {
			return Match{}
		}
		if wildcard && n.share {
			if shared == nil {
				shared = make([]string, len(entries))
			}
			shared[i] = n.value
		}
		if i == len(entries)-1 {
			if n.rateLimit == nil {
				return Match{}
			}
			return Match{RateLimit: n.rateLimit, Limit: n.limit, Limited: n.limited, Penalty: n.penalty, Shares: n.shares, Shadow: n.shadow, Path: n.path, Metered: n.metered, Shared: shared}
		}
		if n.children.empty() {
			return Match{}
		}
		l = &n.children
	}
	return Match{}
}
