package rls

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// Bounds on one domain's configuration and on a request descriptor. A
// configuration or descriptor beyond them is refused with an error naming
// the field.
const (
	// MaxConfigBytes is the largest YAML document Parse reads, and the most
	// a domain's descriptors may hold once anchors and aliases are
	// expanded (contentBytes): a small document of aliases must not become
	// a large domain, which every node keeps in memory and in snapshots.
	MaxConfigBytes = 1 << 20
	// MaxDescriptors is the most descriptors one domain may hold, counting
	// every level.
	MaxDescriptors = 10_000
	// MaxDepth is the most levels descriptors may nest (the top-level list
	// is level 1), and so also the most entries a request descriptor may
	// have.
	MaxDepth = 16
	// MaxDomainBytes is the longest domain, in bytes.
	MaxDomainBytes = 128
	// MaxKeyBytes is the longest descriptor key, in bytes, in a
	// configuration and in a request.
	MaxKeyBytes = 128
	// MaxValueBytes is the longest descriptor value, in bytes, in a
	// configuration and in a request.
	MaxValueBytes = 256
	// MaxNameBytes is the longest rate_limit name and replaces name, in
	// bytes.
	MaxNameBytes = 128
	// MaxReplaces is the most replaces entries one rate_limit may have.
	MaxReplaces = 64
)

// Config is one domain's configuration as the YAML says it. It is also the
// form stored in the Raft log (with msgpack, structs as arrays by field
// position), so its fields, and those of the types it holds, keep their
// order and are all exported.
type Config struct {
	// Domain names the configuration; requests name the domain they are
	// matched in.
	Domain string `yaml:"domain" json:"domain"`
	// Descriptors is the top-level list of descriptors.
	Descriptors []Descriptor `yaml:"descriptors,omitempty" json:"descriptors,omitempty"`
}

// Descriptor is one node of a domain's descriptor tree: it matches a
// request entry by key, and by value when it has one, and may carry a rate
// limit and nested descriptors for the entries after it.
type Descriptor struct {
	// Key must equal the request entry's key.
	Key string `yaml:"key" json:"key"`
	// Value, when not empty, must equal the entry's value; a value holding
	// '*' is a wildcard pattern, each '*' matching zero or more bytes.
	Value string `yaml:"value,omitempty" json:"value,omitempty"`
	// RateLimit is the limit of a request descriptor whose last entry
	// matches this node; nil for a node that only leads to nested ones (or,
	// without nested ones, one that matches and limits nothing).
	RateLimit *RateLimit `yaml:"rate_limit,omitempty" json:"rate_limit,omitempty"`
	// Descriptors match the request's next entry.
	Descriptors []Descriptor `yaml:"descriptors,omitempty" json:"descriptors,omitempty"`
	// ShadowMode: the limit is decided and counted, but a request over it is
	// allowed (Match.Shadow).
	ShadowMode bool `yaml:"shadow_mode,omitempty" json:"shadow_mode,omitempty"`
	// DetailedMetric marks the limit as metered (Match.Metered).
	DetailedMetric bool `yaml:"detailed_metric,omitempty" json:"detailed_metric,omitempty"`
	// ShareThreshold, on a wildcard value only, makes every value the
	// pattern matches count on one counter (Match.Shared).
	ShareThreshold bool `yaml:"share_threshold,omitempty" json:"share_threshold,omitempty"`
}

// RateLimit is a descriptor's rate_limit block.
type RateLimit struct {
	// Unit is the period: SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR.
	// ASCII case does not matter; Parse and Compile store it upper-case.
	// Required unless Unlimited, and refused with it.
	Unit string `yaml:"unit,omitempty" json:"unit,omitempty"`
	// RequestsPerUnit is the rate. 0 refuses every request.
	RequestsPerUnit uint32 `yaml:"requests_per_unit" json:"requests_per_unit"`
	// Unlimited: the descriptor matches and is never limited.
	Unlimited bool `yaml:"unlimited,omitempty" json:"unlimited,omitempty"`
	// Name lets other limits replace this one (Replaces).
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Replaces names the limits this one replaces: when a request's
	// descriptors match both, only this one applies.
	Replaces []Replace `yaml:"replaces,omitempty" json:"replaces,omitempty"`
	// Algorithm is limitnode's extension: any name algorithms.ParseAlgorithm
	// knows; "" is fixed_window, the reference's behaviour.
	Algorithm string `yaml:"algorithm,omitempty" json:"algorithm,omitempty"`
	// Burst is limitnode's extension, for the bucket algorithms only
	// (token_bucket, leaky_bucket, gcra); nil is RequestsPerUnit.
	Burst *uint32 `yaml:"burst,omitempty" json:"burst,omitempty"`
	// Penalty is limitnode's extension: after Denials denials of one
	// counter within Within (a Go duration), its counter key is blocked
	// for BlockFor (see contract.Penalty). Last, as Burst.
	Penalty *Penalty `yaml:"penalty,omitempty" json:"penalty,omitempty"`
	// LocalShares is limitnode's extension: when set, every node may
	// admit a query of this one descriptor from shares of the limit's
	// budget, without a round trip (see contract.LocalShares; Match.Shares
	// has it compiled). Last, as Burst.
	LocalShares *LocalShares `yaml:"local_shares,omitempty" json:"local_shares,omitempty"`
}

// LocalShares is a rate_limit's local_shares as the YAML says it: TTL a Go
// duration ("" for contract.DefaultShareTTL), MaxUnits the most one share
// holds (nil for an eighth of the limit's capacity).
type LocalShares struct {
	TTL      string  `yaml:"ttl,omitempty" json:"ttl,omitempty"`
	MaxUnits *uint32 `yaml:"max_units,omitempty" json:"max_units,omitempty"`
}

// sharesOf is the contract's form of a rate_limit's local_shares, checked
// against the limit l it shares (contract.SharesSpec's rules).
func sharesOf(s *LocalShares, l algorithms.Limit) (*contract.LocalShares, *contract.Error) {
	if s == nil {
		return nil, nil
	}
	var spec contract.SharesSpec
	if s.TTL != "" {
		spec.TTL = &s.TTL
	}
	if s.MaxUnits != nil {
		units := int64(*s.MaxUnits)
		spec.MaxUnits = &units
	}
	return spec.LocalShares(l)
}

// Penalty is a rate_limit's penalty as the YAML says it.
type Penalty struct {
	Denials  uint32 `yaml:"denials" json:"denials"`
	Within   string `yaml:"within" json:"within"`
	BlockFor string `yaml:"block_for" json:"block_for"`
}

// penaltyOf is the contract's form of a rate_limit's penalty, checked.
func penaltyOf(p *Penalty) (*contract.Penalty, *contract.Error) {
	if p == nil {
		return nil, nil
	}
	return contract.PenaltyOf(int64(p.Denials), p.Within, p.BlockFor)
}

// Replace names a limit that a rate_limit replaces.
type Replace struct {
	// Name is the name of the replaced limit.
	Name string `yaml:"name" json:"name"`
}

// unitNames are the units the reference knows, in order of length.
var unitNames = []string{"SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "YEAR"}

// Validate checks c against every rule Parse applies after reading the
// YAML: a domain, keys, units, replaces, share_threshold, algorithms and
// bursts, the limit's bounds, no duplicate descriptor at a level, the
// package's Max bounds, and a domain, keys, values and names of single-line
// UTF-8 text (no control characters: a YAML round trip keeps them). Errors name the field as Parse does, without a line
// number. Units are accepted in any case.
func (c *Config) Validate() *contract.Error {
	return validateConfig(c, nil)
}

// configLines holds the line of each node Parse read, so that validation
// can name it; 0 is a node that was not in the text. The zero value (and a
// nil pointer) has no lines.
type configLines struct {
	root, domain int
	descriptors  []descriptorLines
}

type descriptorLines struct {
	node, key, value, shareThreshold int
	rateLimit                        *rateLimitLines
	descriptors                      []descriptorLines
}

type rateLimitLines struct {
	node, unit, requestsPerUnit, unlimited, name, algorithm, burst, penalty int
	replaces                                                                []int
	localShares                                                             *localSharesLines
}

type localSharesLines struct{ node, ttl, maxUnits int }

// at is the line of the i-th descriptor of a list, or nil.
func at(ls []descriptorLines, i int) *descriptorLines {
	if i < len(ls) {
		return &ls[i]
	}
	return nil
}

// invalid is an invalid_argument error whose message starts with the line,
// when there is one.
func invalid(line int, field, format string, args ...any) *contract.Error {
	msg := fmt.Sprintf(format, args...)
	if line > 0 {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	return contract.Invalid(field, "%s", msg)
}

// firstLine is the first of lines that is known.
func firstLine(lines ...int) int {
	for _, l := range lines {
		if l > 0 {
			return l
		}
	}
	return 0
}

func validateConfig(c *Config, lines *configLines) *contract.Error {
	if lines == nil {
		lines = &configLines{}
	}
	switch {
	case c.Domain == "":
		return invalid(firstLine(lines.domain, lines.root), "domain", "domain is required")
	case len(c.Domain) > MaxDomainBytes:
		return invalid(lines.domain, "domain", "domain is %d bytes; at most %d", len(c.Domain), MaxDomainBytes)
	case badText(c.Domain) != "":
		return invalid(lines.domain, "domain", "domain %s", badText(c.Domain))
	}
	v := validator{}
	return v.descriptors(c.Descriptors, lines.descriptors, firstLine(lines.root), 1)
}

type validator struct {
	count int // descriptors seen so far
	bytes int // their content so far (contentBytes)
}

// contentBytes is what a descriptor holds, its nested descriptors apart: its
// strings, each with the few bytes its key takes in YAML, so that a document
// written out without aliases is never smaller than its content.
func contentBytes(d *Descriptor) int {
	n := len(d.Key) + len(d.Value) + 8
	if rl := d.RateLimit; rl != nil {
		n += len(rl.Unit) + len(rl.Name) + len(rl.Algorithm) + 16
		for _, r := range rl.Replaces {
			n += len(r.Name) + 8
		}
		if s := rl.LocalShares; s != nil {
			n += len(s.TTL) + 8
		}
	}
	return n
}

// levelKey identifies a descriptor within its level.
type levelKey struct{ key, value string }

// descriptors validates one level. parentLine is the line blamed for a
// problem of the whole list.
func (v *validator) descriptors(ds []Descriptor, lines []descriptorLines, parentLine, depth int) *contract.Error {
	if len(ds) == 0 {
		return nil
	}
	if depth > MaxDepth {
		l := at(lines, 0)
		line := parentLine
		if l != nil {
			line = l.node
		}
		return invalid(line, "descriptors", "descriptors nest deeper than %d levels", MaxDepth)
	}
	seen := make(map[levelKey]int, len(ds))
	for i := range ds {
		d := &ds[i]
		l := at(lines, i)
		if l == nil {
			l = &descriptorLines{}
		}
		field := fmt.Sprintf("descriptors[%d]", i)
		v.count++
		if v.count > MaxDescriptors {
			return invalid(l.node, field, "more than %d descriptors in the domain", MaxDescriptors)
		}
		if v.bytes += contentBytes(d); v.bytes > MaxConfigBytes {
			return invalid(l.node, field, "the domain's descriptors hold more than %d bytes once anchors and aliases are expanded", MaxConfigBytes)
		}
		if err := v.descriptor(d, l, depth, seen, i); err != nil {
			return err.Within(field)
		}
	}
	return nil
}

// descriptor validates the i-th descriptor of a level, whose descriptors so
// far are in seen.
func (v *validator) descriptor(d *Descriptor, l *descriptorLines, depth int, seen map[levelKey]int, i int) *contract.Error {
	switch {
	case d.Key == "":
		return invalid(firstLine(l.key, l.node), "key", "descriptor has no key; key is required")
	case len(d.Key) > MaxKeyBytes:
		return invalid(l.key, "key", "key is %d bytes; at most %d", len(d.Key), MaxKeyBytes)
	case strings.Contains(d.Key, "*"):
		return invalid(l.key, "key", "key %q holds '*': limitnode matches keys exactly, '*' is a wildcard in values only", d.Key)
	case badText(d.Key) != "":
		return invalid(l.key, "key", "key %s", badText(d.Key))
	case len(d.Value) > MaxValueBytes:
		return invalid(l.value, "value", "value is %d bytes; at most %d", len(d.Value), MaxValueBytes)
	case badText(d.Value) != "":
		return invalid(l.value, "value", "value %s", badText(d.Value))
	case d.ShareThreshold && !strings.Contains(d.Value, "*"):
		return invalid(firstLine(l.shareThreshold, l.node), "share_threshold", "share_threshold applies only to a wildcard value (one holding '*'); value is %q", d.Value)
	}
	k := levelKey{d.Key, d.Value}
	if j, dup := seen[k]; dup {
		return invalid(l.node, "", "duplicate descriptor: key %q value %q is already descriptors[%d] of this list", d.Key, d.Value, j)
	}
	seen[k] = i
	if d.RateLimit != nil {
		rl := l.rateLimit
		if rl == nil {
			rl = &rateLimitLines{}
		}
		if err := validateRateLimit(d.RateLimit, rl); err != nil {
			return err.Within("rate_limit")
		}
	}
	return v.descriptors(d.Descriptors, l.descriptors, l.node, depth+1)
}

func validateRateLimit(rl *RateLimit, l *rateLimitLines) *contract.Error {
	_, validUnit := UnitPeriod(rl.Unit)
	switch {
	case rl.Unlimited && rl.Unit != "":
		return invalid(l.unit, "unit", "an unlimited rate_limit takes no unit")
	case !rl.Unlimited && rl.Unit == "":
		return invalid(l.node, "unit", "unit is required (one of %s) unless unlimited is true", strings.Join(unitNames, ", "))
	case !rl.Unlimited && !validUnit:
		return invalid(l.unit, "unit", "unknown unit %q; one of %s", rl.Unit, strings.Join(unitNames, ", "))
	case len(rl.Name) > MaxNameBytes:
		return invalid(l.name, "name", "name is %d bytes; at most %d", len(rl.Name), MaxNameBytes)
	case badText(rl.Name) != "":
		return invalid(l.name, "name", "name %s", badText(rl.Name))
	case len(rl.Replaces) > MaxReplaces:
		return invalid(l.node, "replaces", "%d replaces entries; at most %d", len(rl.Replaces), MaxReplaces)
	}
	for i, r := range rl.Replaces {
		line := l.node
		if i < len(l.replaces) {
			line = l.replaces[i]
		}
		field := fmt.Sprintf("replaces[%d].name", i)
		switch {
		case r.Name == "":
			return invalid(line, field, "a replaces entry needs a name")
		case r.Name == rl.Name:
			return invalid(line, field, "a limit cannot replace itself (its name is %q)", rl.Name)
		case len(r.Name) > MaxNameBytes:
			return invalid(line, field, "name is %d bytes; at most %d", len(r.Name), MaxNameBytes)
		case badText(r.Name) != "":
			return invalid(line, field, "name %s", badText(r.Name))
		}
	}
	alg, ok := parseAlgorithm(rl.Algorithm)
	if !ok {
		return invalid(l.algorithm, "algorithm", "unknown algorithm %q; one of %s", rl.Algorithm, algorithmList)
	}
	if rl.Burst != nil && !alg.IsBucket() {
		return invalid(firstLine(l.burst, l.node), "burst", "burst applies to token_bucket, leaky_bucket and gcra; %s admits up to requests_per_unit per unit", alg)
	}
	if _, err := penaltyOf(rl.Penalty); err != nil {
		return invalid(firstLine(l.penalty, l.node), err.Field, "%s", err.Message)
	}
	if rl.Penalty != nil && rl.Unlimited {
		return invalid(firstLine(l.penalty, l.node), "penalty", "an unlimited rate_limit denies nothing, so it takes no penalty")
	}
	if rl.LocalShares != nil && (rl.Unlimited || rl.RequestsPerUnit == 0) {
		return invalid(sharesLine(l, 0), "local_shares", "local_shares share a limit's budget; an unlimited rate_limit, or one of requests_per_unit 0, has none")
	}
	switch {
	case rl.Unlimited:
		return nil
	case rl.RequestsPerUnit == 0:
		// Every request is refused; no limit is decided, so only the
		// burst's own range is checked.
		if rl.Burst != nil && (*rl.Burst < 1 || *rl.Burst > algorithms.MaxBurst) {
			return invalid(l.burst, "burst", "%v", algorithms.ErrBurst)
		}
		return nil
	}
	lim, _ := Limit(rl)
	if err := contract.ValidateLimit(lim); err != nil {
		field, line := err.Field, l.node
		switch field {
		case "rate":
			field, line = "requests_per_unit", firstLine(l.requestsPerUnit, l.node)
		case "period":
			field, line = "unit", firstLine(l.unit, l.node)
		case "burst":
			// A burst that was not given is requests_per_unit's.
			line = firstLine(l.burst, l.requestsPerUnit, l.node)
		case "algorithm":
			line = firstLine(l.algorithm, l.node)
		}
		return invalid(line, field, "%s", err.Message)
	}
	if _, err := sharesOf(rl.LocalShares, lim); err != nil {
		line := 0
		switch err.Field {
		case "local_shares.ttl":
			line = sharesLine(l, l.localShares.ttlLine())
		case "local_shares.max_units":
			line = sharesLine(l, l.localShares.maxUnitsLine())
		}
		return invalid(firstLine(line, sharesLine(l, 0)), err.Field, "%s", err.Message)
	}
	return nil
}

// sharesLine is line when known, else the line of the rate_limit's
// local_shares, else the rate_limit's.
func sharesLine(l *rateLimitLines, line int) int {
	if s := l.localShares; s != nil {
		return firstLine(line, s.node, l.node)
	}
	return firstLine(line, l.node)
}

func (s *localSharesLines) ttlLine() int {
	if s == nil {
		return 0
	}
	return s.ttl
}

func (s *localSharesLines) maxUnitsLine() int {
	if s == nil {
		return 0
	}
	return s.maxUnits
}

// badText says what is wrong with a domain, key, value or name that is not
// single-line UTF-8 text: one that is not UTF-8 or holds a control
// character (tab and line breaks included) or a line or paragraph
// separator. It is "" for a good one.
func badText(s string) string {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return "is not UTF-8"
		case r < 0x20 || 0x7f <= r && r < 0xa0 || r == '\u2028' || r == '\u2029':
			return fmt.Sprintf("holds the control character %U; it must be a single line of text", r)
		}
	}
	return ""
}

// algorithmList names every algorithm, for messages.
var algorithmList = func() string {
	var names []string
	for a := algorithms.TokenBucket; a <= algorithms.SlidingWindowCounter; a++ {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}()

// parseAlgorithm is algorithms.ParseAlgorithm with "" as fixed_window.
func parseAlgorithm(name string) (algorithms.Algorithm, bool) {
	if name == "" {
		return algorithms.FixedWindow, true
	}
	alg, err := algorithms.ParseAlgorithm(name)
	return alg, err == nil
}
