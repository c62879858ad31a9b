package rls

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/limitnode/limitnode/contract"
	"go.yaml.in/yaml/v3"
)

// Parse reads one domain's configuration from YAML (JSON is YAML too) and
// validates it whole (Config.Validate). Units come back in upper case.
//
// An error names the field at fault as a path
// ("descriptors[0].descriptors[1].rate_limit.unit") and its message starts
// with "line N: ", N being the line of the offending node (for a missing
// field, of the mapping that lacks it). Refused, besides what Validate
// refuses:
//   - more than MaxConfigBytes and an empty document (no field, no line);
//     more than one document, text that is not UTF-8 or holds characters
//     YAML does not allow, and YAML that does not parse (no field; the
//     line the YAML library gives);
//   - an unknown key, a key in the wrong place (the reference ignores those
//     it knows), a key given twice, a key that is not a string;
//   - quota_mode and value_to_metric but false, and metadata but an empty
//     one, which limitnode does not implement (the message says why;
//     what is accepted changes nothing);
//   - a value of the wrong type: a string, list or mapping where a number
//     goes, a list or mapping where a string goes, and so on; a number
//     that is negative, beyond 4294967295 or not whole (the reference
//     truncates fractions).
//
// As in the reference (its YAML library), a string field takes any scalar
// as written (value: 200 is "200"), null is an absent field, true and false
// may also be spelled yes, no, on, off, y and n, and anchors, aliases and
// merge keys (<<) are followed.
func Parse(data []byte) (Config, *contract.Error) {
	if len(data) > MaxConfigBytes {
		return Config{}, contract.Invalid("", "the configuration is %d bytes; at most %d", len(data), MaxConfigBytes)
	}
	if err := checkText(data); err != nil {
		return Config{}, err
	}
	doc, err := decodeOne(data)
	if err != nil {
		return Config{}, err
	}
	p := parser{}
	c, lines, err := p.config(doc)
	if err != nil {
		return Config{}, err
	}
	if err := validateConfig(&c, &lines); err != nil {
		return Config{}, err
	}
	return c, nil
}

// decodeOne parses data as exactly one YAML document and returns its root.
func decodeOne(data []byte) (root *yaml.Node, cerr *contract.Error) {
	defer func() {
		// The YAML library reports errors by panicking internally and
		// recovers them itself; should one escape, it is still only a
		// document that cannot be read.
		if r := recover(); r != nil {
			root, cerr = nil, contract.Invalid("", "the YAML cannot be parsed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, contract.Invalid("", "the configuration is empty; it needs a domain and descriptors")
		}
		return nil, yamlError(err, data)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, contract.Invalid("", "line %d: a second YAML document; a configuration is one document, of one domain", next.Line)
	case !errors.Is(err, io.EOF):
		return nil, yamlError(err, data)
	}
	if len(doc.Content) == 0 {
		return nil, contract.Invalid("", "the configuration is empty; it needs a domain and descriptors")
	}
	root = resolve(doc.Content[0])
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, contract.Invalid("", "line %d: the configuration is empty; it needs a domain and descriptors", root.Line)
	}
	return root, nil
}

// yamlError turns the YAML library's error ("yaml: line 3: did not find
// expected key") into one that starts with the line. The library leaves
// the line out when it is the first, and for an unknown anchor, whose first
// use is looked for in data.
func yamlError(err error, data []byte) *contract.Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if strings.HasPrefix(msg, "line ") {
		return contract.Invalid("", "%s", msg)
	}
	line := 1
	if name, ok := strings.CutPrefix(msg, "unknown anchor '"); ok {
		name = strings.TrimSuffix(name, "' referenced")
		if i := bytes.Index(data, []byte("*"+name)); i >= 0 {
			line += bytes.Count(data[:i], []byte("\n"))
		}
	}
	return contract.Invalid("", "line %d: %s", line, msg)
}

// checkText refuses what the YAML library would refuse without saying where:
// bytes that are not UTF-8 and characters YAML does not allow (most control
// characters).
func checkText(data []byte) *contract.Error {
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return contract.Invalid("", "line %d: the configuration is not UTF-8 (byte 0x%02x)", line, data[i])
		case r == '\n':
			line++
		case r == '\t' || r == '\r' || r == 0x85 ||
			0x20 <= r && r <= 0x7e || 0xa0 <= r && r <= 0xd7ff || 0xe000 <= r && r <= 0xfffd || r >= 0x10000:
		default:
			return contract.Invalid("", "line %d: character %U is not allowed in YAML", line, r)
		}
		i += size
	}
	return nil
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// describe names a node's type for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return fmt.Sprintf("the number %s", n.Value)
		}
		return fmt.Sprintf("the string %q", n.Value)
	}
	return "an alias"
}

// isNull reports whether n is an explicit null (or an empty value).
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// A keySet is the keys a mapping may hold.
type keySet struct {
	what string // "a descriptor", for messages
	keys []string
}

var (
	rootKeys       = keySet{"the configuration", []string{"domain", "descriptors"}}
	descriptorKeys = keySet{"a descriptor", []string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric", "share_threshold"}}
	rateLimitKeys  = keySet{"a rate_limit", []string{"unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "burst", "penalty", "local_shares"}}
	sharesKeys     = keySet{"a local_shares", []string{"ttl", "max_units"}}
	penaltyKeys    = keySet{"a penalty", []string{"denials", "within", "block_for"}}
	replaceKeys    = keySet{"a replaces entry", []string{"name"}}
)

// unsupported are keys of a descriptor that the reference knows and
// limitnode refuses unless they ask for nothing (false, or an empty
// metadata), with why.
var unsupported = map[string]string{
	"quota_mode": "envoyproxy/ratelimit then refuses a request only when every quota_mode descriptor of it is over its limit, and admits it, reporting the others over, while one has room; " +
		"limitnode decides the descriptors of a request all or nothing and does not implement that rule. To report a limit without enforcing it, use shadow_mode: true",
	"value_to_metric": "it puts request values into metric names, whose number a client could then grow without bound; detailed_metric: true meters a limit under its configured name or path",
	"metadata":        "limitnode keeps no metadata of a descriptor and adds none to the answer's dynamic_metadata, which carries its own denied_by",
}

// refusedUse names what limitnode refuses of an unsupported key.
func refusedUse(name string) string {
	if name == "metadata" {
		return "metadata (an empty one is accepted)"
	}
	return name + ": true (false is accepted)"
}

// asksForNothing reports whether the value of an unsupported key is its
// default, which changes nothing: false, null or an empty mapping.
func asksForNothing(v *yaml.Node) bool {
	v = resolve(v)
	if v.Kind == yaml.MappingNode {
		return len(v.Content) == 0
	}
	b, _, err := boolean(v, "")
	return err == nil && !b
}

func (s keySet) has(k string) bool {
	for _, x := range s.keys {
		if x == k {
			return true
		}
	}
	return false
}

// pair is one key of a mapping and its value.
type pair struct {
	key   string
	line  int // the key's line
	value *yaml.Node
}

// maxMerges bounds the mappings merged with merge keys (<<) in one document,
// so that merges of merges cannot make the walk exponential.
const maxMerges = 1000

// parser walks the YAML tree into a Config.
type parser struct {
	count   int          // descriptors read
	merges  int          // mappings merged
	merging []*yaml.Node // the mappings being collected, outermost first
}

// mapping returns the pairs of a mapping node, merge keys expanded (a key
// of the mapping itself wins over a merged one, an earlier merged mapping
// over a later one), after checking that each key is a string, allowed in
// the mapping and given once. field names the mapping.
func (p *parser) mapping(n *yaml.Node, field string, keys keySet) ([]pair, *contract.Error) {
	var pairs []pair
	if err := p.collect(n, field, keys, &pairs, false); err != nil {
		return nil, err
	}
	return pairs, nil
}

func (p *parser) collect(n *yaml.Node, field string, keys keySet, pairs *[]pair, merged bool) *contract.Error {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return invalid(n.Line, field, "%s must be a mapping, not %s", keys.what, describe(n))
	}
	for _, m := range p.merging {
		if m == n {
			return invalid(n.Line, field, "a mapping merges itself (<<)")
		}
	}
	p.merging = append(p.merging, n)
	defer func() { p.merging = p.merging[:len(p.merging)-1] }()
	if merged {
		p.merges++
		if p.merges > maxMerges {
			return invalid(n.Line, field, "more than %d mappings merged with merge keys (<<)", maxMerges)
		}
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			return invalid(k.Line, field, "a key in %s must be a string, not %s", keys.what, describe(k))
		}
		name := k.Value
		kfield := join(field, name)
		why, refused := unsupported[name]
		inDescriptor := keys.what == descriptorKeys.what
		switch {
		case refused && inDescriptor && !asksForNothing(v):
			return invalid(k.Line, kfield, "limitnode does not support %s: %s", refusedUse(name), why)
		case refused && !inDescriptor, !refused && !keys.has(name):
			return invalid(k.Line, kfield, "unknown key %q in %s; the keys are %s", name, keys.what, strings.Join(keys.keys, ", "))
		}
		dup := false
		for _, q := range *pairs {
			if q.key == name {
				dup = true
				if !merged {
					return invalid(k.Line, kfield, "key %q is given twice in %s (also on line %d)", name, keys.what, q.line)
				}
			}
		}
		if !dup {
			*pairs = append(*pairs, pair{key: name, line: k.Line, value: v})
		}
	}
	for _, m := range merges {
		m = resolve(m)
		switch m.Kind {
		case yaml.MappingNode:
			if err := p.collect(m, field, keys, pairs, true); err != nil {
				return err
			}
		case yaml.SequenceNode:
			for _, e := range m.Content {
				if err := p.collect(e, field, keys, pairs, true); err != nil {
					return err
				}
			}
		default:
			return invalid(m.Line, field, "a merge key (<<) takes a mapping or a list of mappings, not %s", describe(m))
		}
	}
	return nil
}

// join is the path of key within field.
func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func (p *parser) config(n *yaml.Node) (Config, configLines, *contract.Error) {
	var c Config
	lines := configLines{root: n.Line}
	pairs, err := p.mapping(n, "", rootKeys)
	if err != nil {
		return Config{}, lines, err
	}
	for _, kv := range pairs {
		switch kv.key {
		case "domain":
			c.Domain, lines.domain, err = str(kv.value, "domain")
		case "descriptors":
			c.Descriptors, lines.descriptors, err = p.descriptors(kv.value, "descriptors", 1)
		}
		if err != nil {
			return Config{}, lines, err
		}
	}
	return c, lines, nil
}

func (p *parser) descriptors(n *yaml.Node, field string, depth int) ([]Descriptor, []descriptorLines, *contract.Error) {
	n = resolve(n)
	if isNull(n) {
		return nil, nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, nil, invalid(n.Line, field, "descriptors must be a list of descriptors, not %s", describe(n))
	}
	if len(n.Content) == 0 {
		return nil, nil, nil
	}
	if depth > MaxDepth {
		return nil, nil, invalid(n.Line, field, "descriptors nest deeper than %d levels", MaxDepth)
	}
	ds := make([]Descriptor, len(n.Content))
	ls := make([]descriptorLines, len(n.Content))
	for i, e := range n.Content {
		efield := fmt.Sprintf("%s[%d]", field, i)
		p.count++
		if p.count > MaxDescriptors {
			return nil, nil, invalid(resolve(e).Line, efield, "more than %d descriptors in the domain", MaxDescriptors)
		}
		var err *contract.Error
		ds[i], ls[i], err = p.descriptor(e, efield, depth)
		if err != nil {
			return nil, nil, err
		}
	}
	return ds, ls, nil
}

func (p *parser) descriptor(n *yaml.Node, field string, depth int) (Descriptor, descriptorLines, *contract.Error) {
	var d Descriptor
	n = resolve(n)
	lines := descriptorLines{node: n.Line}
	pairs, err := p.mapping(n, field, descriptorKeys)
	if err != nil {
		return d, lines, err
	}
	for _, kv := range pairs {
		f := join(field, kv.key)
		switch kv.key {
		case "key":
			d.Key, lines.key, err = str(kv.value, f)
		case "value":
			d.Value, lines.value, err = str(kv.value, f)
		case "rate_limit":
			d.RateLimit, lines.rateLimit, err = p.rateLimit(kv.value, f)
		case "descriptors":
			d.Descriptors, lines.descriptors, err = p.descriptors(kv.value, f, depth+1)
		case "shadow_mode":
			d.ShadowMode, _, err = boolean(kv.value, f)
		case "detailed_metric":
			d.DetailedMetric, _, err = boolean(kv.value, f)
		case "share_threshold":
			d.ShareThreshold, lines.shareThreshold, err = boolean(kv.value, f)
		}
		if err != nil {
			return d, lines, err
		}
	}
	return d, lines, nil
}

func (p *parser) rateLimit(n *yaml.Node, field string) (*RateLimit, *rateLimitLines, *contract.Error) {
	n = resolve(n)
	if isNull(n) {
		return nil, nil, nil
	}
	rl := &RateLimit{}
	lines := &rateLimitLines{node: n.Line}
	pairs, err := p.mapping(n, field, rateLimitKeys)
	if err != nil {
		return nil, nil, err
	}
	for _, kv := range pairs {
		f := join(field, kv.key)
		switch kv.key {
		case "unit":
			rl.Unit, lines.unit, err = str(kv.value, f)
			rl.Unit = canonicalUnit(rl.Unit)
		case "requests_per_unit":
			rl.RequestsPerUnit, lines.requestsPerUnit, err = uint32Of(kv.value, f)
		case "unlimited":
			rl.Unlimited, lines.unlimited, err = boolean(kv.value, f)
		case "name":
			rl.Name, lines.name, err = str(kv.value, f)
		case "replaces":
			rl.Replaces, lines.replaces, err = p.replaces(kv.value, f)
		case "algorithm":
			rl.Algorithm, lines.algorithm, err = str(kv.value, f)
		case "burst":
			v := resolve(kv.value)
			if !isNull(v) {
				var b uint32
				b, lines.burst, err = uint32Of(v, f)
				rl.Burst = &b
			}
		case "penalty":
			rl.Penalty, lines.penalty, err = p.penalty(kv.value, f)
		case "local_shares":
			rl.LocalShares, lines.localShares, err = p.localShares(kv.value, f)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return rl, lines, nil
}

// penalty reads a rate_limit's penalty: {denials: N, within: D, block_for:
// D}, the durations as Go durations.
func (p *parser) penalty(n *yaml.Node, field string) (*Penalty, int, *contract.Error) {
	n = resolve(n)
	if isNull(n) {
		return nil, 0, nil
	}
	pairs, err := p.mapping(n, field, penaltyKeys)
	if err != nil {
		return nil, 0, err
	}
	out := &Penalty{}
	for _, kv := range pairs {
		f := join(field, kv.key)
		switch kv.key {
		case "denials":
			out.Denials, _, err = uint32Of(kv.value, f)
		case "within":
			out.Within, _, err = str(kv.value, f)
		case "block_for":
			out.BlockFor, _, err = str(kv.value, f)
		}
		if err != nil {
			return nil, 0, err
		}
	}
	return out, n.Line, nil
}

// localShares reads a rate_limit's local_shares: {} for the defaults, or
// {ttl: D, max_units: N}, the TTL a Go duration. null is no local_shares.
func (p *parser) localShares(n *yaml.Node, field string) (*LocalShares, *localSharesLines, *contract.Error) {
	n = resolve(n)
	if isNull(n) {
		return nil, nil, nil
	}
	pairs, err := p.mapping(n, field, sharesKeys)
	if err != nil {
		return nil, nil, err
	}
	out, lines := &LocalShares{}, &localSharesLines{node: n.Line}
	for _, kv := range pairs {
		f := join(field, kv.key)
		switch kv.key {
		case "ttl":
			out.TTL, lines.ttl, err = str(kv.value, f)
		case "max_units":
			if v := resolve(kv.value); !isNull(v) {
				var units uint32
				units, lines.maxUnits, err = uint32Of(v, f)
				out.MaxUnits = &units
			}
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return out, lines, nil
}

func (p *parser) replaces(n *yaml.Node, field string) ([]Replace, []int, *contract.Error) {
	n = resolve(n)
	if isNull(n) {
		return nil, nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, nil, invalid(n.Line, field, "replaces must be a list of {name: ...}, not %s", describe(n))
	}
	if len(n.Content) == 0 {
		return nil, nil, nil
	}
	if len(n.Content) > MaxReplaces {
		return nil, nil, invalid(n.Line, field, "%d replaces entries; at most %d", len(n.Content), MaxReplaces)
	}
	rs := make([]Replace, len(n.Content))
	lines := make([]int, len(n.Content))
	for i, e := range n.Content {
		efield := fmt.Sprintf("%s[%d]", field, i)
		e = resolve(e)
		lines[i] = e.Line
		pairs, err := p.mapping(e, efield, replaceKeys)
		if err != nil {
			return nil, nil, err
		}
		for _, kv := range pairs {
			if rs[i].Name, lines[i], err = str(kv.value, join(efield, kv.key)); err != nil {
				return nil, nil, err
			}
		}
	}
	return rs, lines, nil
}

// str reads a string: any scalar, as written; null is "".
func str(n *yaml.Node, field string) (string, int, *contract.Error) {
	n = resolve(n)
	switch {
	case n.Kind != yaml.ScalarNode:
		return "", n.Line, invalid(n.Line, field, "must be a string, not %s", describe(n))
	case isNull(n):
		return "", n.Line, nil
	}
	return n.Value, n.Line, nil
}

// boolean reads true or false (also yes/no, on/off, y/n unquoted, as YAML
// 1.1 and the reference); null is false.
func boolean(n *yaml.Node, field string) (bool, int, *contract.Error) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!null":
			return false, n.Line, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err == nil {
				return b, n.Line, nil
			}
		case "!!str":
			if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
				switch n.Value {
				case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON":
					return true, n.Line, nil
				case "n", "N", "no", "No", "NO", "off", "Off", "OFF":
					return false, n.Line, nil
				}
			}
		}
	}
	return false, n.Line, invalid(n.Line, field, "must be true or false, not %s", describe(n))
}

// uint32Of reads a whole number from 0 to 4294967295; null is 0.
func uint32Of(n *yaml.Node, field string) (uint32, int, *contract.Error) {
	n = resolve(n)
	bad := func() (uint32, int, *contract.Error) {
		return 0, n.Line, invalid(n.Line, field, "must be a whole number from 0 to %d, not %s", uint32(math.MaxUint32), describe(n))
	}
	if n.Kind != yaml.ScalarNode {
		return bad()
	}
	switch n.ShortTag() {
	case "!!null":
		return 0, n.Line, nil
	case "!!int":
		var v int64
		if err := n.Decode(&v); err != nil || v < 0 || v > math.MaxUint32 {
			return bad()
		}
		return uint32(v), n.Line, nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || f < 0 || f > math.MaxUint32 || f != math.Trunc(f) {
			return bad()
		}
		return uint32(f), n.Line, nil
	}
	return bad()
}
