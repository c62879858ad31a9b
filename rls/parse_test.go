package rls

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/contract"
)

func TestParseErrorsNameFieldAndLine(t *testing.T) {
	t.Parallel()
	const head = "domain: d\ndescriptors:\n"
	tests := []struct {
		name  string
		yaml  string
		field string
		line  int    // 0: the message has no line
		msg   string // a part of the message
	}{
		// The document.
		{"empty", "", "", 0, "empty"},
		{"only a comment", "# nothing\n", "", 0, "empty"},
		{"null document", "---\n~\n", "", 2, "empty"},
		{"two documents", "domain: a\n---\ndomain: b\n", "", 2, "second YAML document"},
		{"syntax", "domain: d\ndescriptors: [\n", "", 2, "did not find expected node content"},
		{"bad indentation", "domain: d\n descriptors: x\n", "", 2, "mapping values are not allowed"},
		{"a list", "- domain: d\n", "", 1, "must be a mapping, not a list"},
		{"a string", "hello\n", "", 1, `must be a mapping, not the string "hello"`},
		{"not UTF-8", "domain: d\ndescriptors:\n  - key: \xff\n", "", 3, "not UTF-8"},
		{"a control character", "domain: d\n\x01\n", "", 2, "U+0001 is not allowed"},
		{"a bad escape on line 1", "domain: \"\\xq\"\n", "", 1, "hexdecimal"},
		{"an unknown anchor", "domain: d\ndescriptors:\n  - key: *k\n", "", 3, "unknown anchor 'k'"},
		{"too large", "domain: d\n#" + strings.Repeat("x", MaxConfigBytes), "", 0, "at most 1048576"},

		// Keys.
		{"unknown top-level key", "domain: d\ndescriptor: []\n", "descriptor", 2, `unknown key "descriptor"`},
		{"unknown descriptor key", head + "  - key: k\n    rate-limit: {}\n", "descriptors[0].rate-limit", 4, `unknown key "rate-limit" in a descriptor`},
		{"a rate_limit key in a descriptor", head + "  - key: k\n    unit: second\n", "descriptors[0].unit", 4, `unknown key "unit" in a descriptor`},
		{"unknown rate_limit key", head + "  - key: k\n    rate_limit:\n      unit: second\n      request_per_unit: 5\n", "descriptors[0].rate_limit.request_per_unit", 6, "unknown key"},
		{"unknown replaces key", head + "  - key: k\n    rate_limit:\n      unit: second\n      replaces:\n        - nam: x\n", "descriptors[0].rate_limit.replaces[0].nam", 7, "unknown key"},
		{"a key twice", head + "  - key: k\n    key: j\n", "descriptors[0].key", 4, `key "key" is given twice in a descriptor (also on line 3)`},
		{"a key that is a number", "domain: d\n1: x\n", "", 2, "must be a string, not the number 1"},
		{"a key that is a list", "domain: d\n? [a]\n: x\n", "", 2, "must be a string, not a list"},
		{"quota_mode", head + "  - key: k\n    quota_mode: true\n", "descriptors[0].quota_mode", 4, "limitnode does not support quota_mode: true (false is accepted): envoyproxy/ratelimit then refuses a request only when every quota_mode descriptor"},
		{"quota_mode spelled yes", head + "  - key: k\n    quota_mode: yes\n", "descriptors[0].quota_mode", 4, "use shadow_mode: true"},
		{"quota_mode not a boolean", head + "  - key: k\n    quota_mode: 0\n", "descriptors[0].quota_mode", 4, "limitnode does not support quota_mode"},
		{"quota_mode in a rate_limit", head + "  - key: k\n    rate_limit:\n      unit: second\n      quota_mode: false\n", "descriptors[0].rate_limit.quota_mode", 6, `unknown key "quota_mode" in a rate_limit`},
		{"quota_mode false twice", head + "  - key: k\n    quota_mode: false\n    quota_mode: false\n", "descriptors[0].quota_mode", 5, "given twice"},
		{"value_to_metric", head + "  - key: k\n    descriptors:\n      - key: j\n        value_to_metric: true\n", "descriptors[0].descriptors[0].value_to_metric", 6, "limitnode does not support value_to_metric: true (false is accepted): it puts request values into metric names"},
		{"metadata", head + "  - key: k\n    metadata:\n      a: b\n", "descriptors[0].metadata", 4, "limitnode does not support metadata (an empty one is accepted): limitnode keeps no metadata of a descriptor"},
		{"metadata a list", head + "  - key: k\n    metadata: []\n", "descriptors[0].metadata", 4, "does not support metadata"},

		// Types.
		{"domain is a list", "domain: [a]\n", "domain", 1, "must be a string, not a list"},
		{"descriptors is a mapping", "domain: d\ndescriptors:\n  key: k\n", "descriptors", 3, "must be a list of descriptors, not a mapping"},
		{"descriptors is a string", "domain: d\ndescriptors: none\n", "descriptors", 2, "not the string"},
		{"a descriptor is a string", head + "  - key\n", "descriptors[0]", 3, "a descriptor must be a mapping"},
		{"a key is a mapping", head + "  - key: {a: b}\n", "descriptors[0].key", 3, "must be a string, not a mapping"},
		{"rate_limit is a list", head + "  - key: k\n    rate_limit: [1]\n", "descriptors[0].rate_limit", 4, "a rate_limit must be a mapping, not a list"},
		{"requests_per_unit is a string", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: \"5\"\n", "descriptors[0].rate_limit.requests_per_unit", 6, `not the string "5"`},
		{"requests_per_unit is a word", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: five\n", "descriptors[0].rate_limit.requests_per_unit", 6, "whole number from 0 to 4294967295"},
		{"requests_per_unit is negative", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: -1\n", "descriptors[0].rate_limit.requests_per_unit", 6, "the number -1"},
		{"requests_per_unit beyond uint32", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 4294967296\n", "descriptors[0].rate_limit.requests_per_unit", 6, "the number 4294967296"},
		{"requests_per_unit beyond int64", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 99999999999999999999999\n", "descriptors[0].rate_limit.requests_per_unit", 6, "whole number"},
		{"requests_per_unit with a fraction", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1.5\n", "descriptors[0].rate_limit.requests_per_unit", 6, "the number 1.5"},
		{"requests_per_unit is a list", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: [5]\n", "descriptors[0].rate_limit.requests_per_unit", 6, "not a list"},
		{"burst is negative", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: gcra\n      burst: -5\n", "descriptors[0].rate_limit.burst", 8, "the number -5"},
		{"shadow_mode is a string", head + "  - key: k\n    shadow_mode: \"true\"\n", "descriptors[0].shadow_mode", 4, "must be true or false"},
		{"shadow_mode is a number", head + "  - key: k\n    shadow_mode: 1\n", "descriptors[0].shadow_mode", 4, "must be true or false, not the number 1"},
		{"unlimited is a word", head + "  - key: k\n    rate_limit:\n      unlimited: maybe\n", "descriptors[0].rate_limit.unlimited", 5, "must be true or false"},
		{"replaces is a mapping", head + "  - key: k\n    rate_limit:\n      unit: second\n      replaces: {name: x}\n", "descriptors[0].rate_limit.replaces", 6, "must be a list"},
		{"a replaces entry is a string", head + "  - key: k\n    rate_limit:\n      unit: second\n      replaces: [x]\n", "descriptors[0].rate_limit.replaces[0]", 6, "a replaces entry must be a mapping"},
		{"a mapping that merges itself", head + "  - &d\n    key: k\n    <<: *d\n", "descriptors[0]", 3, "merges itself"},
		{"descriptors that hold themselves", "domain: d\ndescriptors: &l\n  - key: k\n    descriptors: *l\n", deepField(MaxDepth), 2, "deeper than 16"},
		{"a merge of a string", head + "  - <<: x\n    key: k\n", "descriptors[0]", 3, "merge key"},

		// Rules.
		{"no domain", "descriptors: []\n", "domain", 1, "domain is required"},
		{"an empty domain", "domain: \"\"\n", "domain", 1, "domain is required"},
		{"a long domain", "domain: " + strings.Repeat("d", MaxDomainBytes+1) + "\n", "domain", 1, "at most 128"},
		{"no key", head + "  - value: v\n", "descriptors[0].key", 3, "key is required"},
		{"an empty key", head + "  - key: k\n    descriptors:\n      - key: \"\"\n", "descriptors[0].descriptors[0].key", 5, "key is required"},
		{"a long key", head + "  - key: " + strings.Repeat("k", MaxKeyBytes+1) + "\n", "descriptors[0].key", 3, "at most 128"},
		{"a wildcard key", head + "  - key: k*\n", "descriptors[0].key", 3, "matches keys exactly"},
		{"a value with a tab", head + "  - key: k\n    value: \"a\\tb\"\n", "descriptors[0].value", 4, "control character U+0009"},
		{"a name on two lines", head + "  - key: k\n    rate_limit:\n      unit: second\n      name: |\n        a\n        b\n", "descriptors[0].rate_limit.name", 6, "control character U+000A"},
		{"a long value", head + "  - key: k\n    value: " + strings.Repeat("v", MaxValueBytes+1) + "\n", "descriptors[0].value", 4, "at most 256"},
		{"a duplicate descriptor", head + "  - key: k\n    value: v\n  - key: j\n  - key: k\n    value: v\n", "descriptors[2]", 6, "duplicate descriptor"},
		{"a duplicate key without value", head + "  - key: k\n    descriptors:\n      - key: j\n      - key: j\n", "descriptors[0].descriptors[1]", 6, "duplicate descriptor"},
		{"no unit", head + "  - key: k\n    rate_limit:\n      requests_per_unit: 5\n", "descriptors[0].rate_limit.unit", 5, "unit is required"},
		{"an unknown unit", head + "  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 5\n", "descriptors[0].rate_limit.unit", 5, `unknown unit "fortnight"`},
		{"the UNKNOWN unit", head + "  - key: k\n    rate_limit:\n      unit: unknown\n      requests_per_unit: 5\n", "descriptors[0].rate_limit.unit", 5, "unknown unit"},
		{"unlimited with a unit", head + "  - key: k\n    rate_limit:\n      unlimited: true\n      unit: second\n", "descriptors[0].rate_limit.unit", 6, "unlimited rate_limit takes no unit"},
		{"an empty replaces name", head + "  - key: k\n    rate_limit:\n      unit: second\n      replaces:\n        - name: a\n        - name: \"\"\n", "descriptors[0].rate_limit.replaces[1].name", 8, "needs a name"},
		{"a replaces entry without name", head + "  - key: k\n    rate_limit:\n      unit: second\n      replaces:\n        - {}\n", "descriptors[0].rate_limit.replaces[0].name", 7, "needs a name"},
		{"replaces itself", head + "  - key: k\n    rate_limit:\n      name: me\n      unit: second\n      replaces:\n        - name: me\n", "descriptors[0].rate_limit.replaces[0].name", 8, "cannot replace itself"},
		{"too many replaces", head + "  - key: k\n    rate_limit:\n      unit: second\n      replaces: [" + strings.Repeat("{name: x},", MaxReplaces) + "{name: x}]\n", "descriptors[0].rate_limit.replaces", 6, "at most 64"},
		{"a long name", head + "  - key: k\n    rate_limit:\n      unit: second\n      name: " + strings.Repeat("n", MaxNameBytes+1) + "\n", "descriptors[0].rate_limit.name", 6, "at most 128"},
		{"share_threshold without a wildcard", head + "  - key: k\n    value: v\n    share_threshold: true\n", "descriptors[0].share_threshold", 5, "only to a wildcard value"},
		{"share_threshold without a value", head + "  - key: k\n    share_threshold: true\n", "descriptors[0].share_threshold", 4, "only to a wildcard value"},
		{"an unknown algorithm", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: magic\n", "descriptors[0].rate_limit.algorithm", 7, `unknown algorithm "magic"`},
		{"a penalty without a window", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      penalty: {denials: 3, block_for: 1m}\n", "descriptors[0].rate_limit.penalty.within", 7, "within is required"},
		{"a penalty of no denials", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      penalty: {denials: 0, within: 1m, block_for: 1m}\n", "descriptors[0].rate_limit.penalty.denials", 7, "denials must be"},
		{"a penalty with an unknown key", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      penalty: {times: 3}\n", "descriptors[0].rate_limit.penalty.times", 7, `unknown key "times" in a penalty`},
		{"a penalty on an unlimited rate_limit", head + "  - key: k\n    rate_limit:\n      unlimited: true\n      penalty: {denials: 3, within: 1m, block_for: 1m}\n", "descriptors[0].rate_limit.penalty", 6, "takes no penalty"},
		{"local_shares on the descriptor, not its rate_limit", head + "  - key: k\n    local_shares: {}\n", "descriptors[0].local_shares", 4, `unknown key "local_shares" in a descriptor`},
		{"local_shares is a boolean", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares: true\n", "descriptors[0].rate_limit.local_shares", 7, "a local_shares must be a mapping, not a boolean"},
		{"local_shares with an unknown key", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares: {units: 5}\n", "descriptors[0].rate_limit.local_shares.units", 7, `unknown key "units" in a local_shares; the keys are ttl, max_units`},
		{"a share TTL too short", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares:\n        ttl: 5ms\n", "descriptors[0].rate_limit.local_shares.ttl", 8, "ttl must be from 10ms to 1s"},
		{"a share TTL too long", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares:\n        max_units: 5\n        ttl: 2s\n", "descriptors[0].rate_limit.local_shares.ttl", 9, "ttl must be from 10ms to 1s"},
		{"a share TTL of 0", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares: {ttl: 0s}\n", "descriptors[0].rate_limit.local_shares.ttl", 7, "ttl must be from 10ms to 1s"},
		{"a share TTL that is not a duration", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares: {ttl: soon}\n", "descriptors[0].rate_limit.local_shares.ttl", 7, "a Go duration"},
		{"a share TTL that is a list", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares: {ttl: [1s]}\n", "descriptors[0].rate_limit.local_shares.ttl", 7, "must be a string, not a list"},
		{"max_units 0", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares:\n        ttl: 100ms\n        max_units: 0\n", "descriptors[0].rate_limit.local_shares.max_units", 9, "max_units must be from 1 to the limit's capacity (100)"},
		{"max_units beyond the capacity", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares:\n        max_units: 101\n", "descriptors[0].rate_limit.local_shares.max_units", 8, "max_units must be from 1 to the limit's capacity (100)"},
		{"max_units beyond a bucket's burst", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      algorithm: token_bucket\n      burst: 10\n      local_shares: {max_units: 11}\n", "descriptors[0].rate_limit.local_shares.max_units", 9, "capacity (10)"},
		{"max_units negative", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares: {max_units: -1}\n", "descriptors[0].rate_limit.local_shares.max_units", 7, "the number -1"},
		{"max_units with a fraction", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares: {max_units: 2.5}\n", "descriptors[0].rate_limit.local_shares.max_units", 7, "the number 2.5"},
		{"local_shares on an unlimited rate_limit", head + "  - key: k\n    rate_limit:\n      unlimited: true\n      local_shares: {}\n", "descriptors[0].rate_limit.local_shares", 6, "has none"},
		{"local_shares on a rate_limit that refuses everything", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 0\n      local_shares: {}\n", "descriptors[0].rate_limit.local_shares", 7, "has none"},
		{"local_shares given twice", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n      local_shares: {}\n      local_shares: {}\n", "descriptors[0].rate_limit.local_shares", 8, "given twice"},
		{"burst on the default window", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      burst: 10\n", "descriptors[0].rate_limit.burst", 7, "burst applies to token_bucket"},
		{"burst on a window", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: sliding_window_counter\n      burst: 10\n", "descriptors[0].rate_limit.burst", 8, "burst applies to token_bucket"},
		{"burst 0", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: token_bucket\n      burst: 0\n", "descriptors[0].rate_limit.burst", 8, "burst must be"},
		{"burst 0, requests 0", head + "  - key: k\n    rate_limit:\n      unit: second\n      algorithm: token_bucket\n      burst: 0\n", "descriptors[0].rate_limit.burst", 7, "burst must be"},
		{"a rate beyond the bounds", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 4000000000\n", "descriptors[0].rate_limit.requests_per_unit", 6, "rate must be"},
		{"a log too long", head + "  - key: k\n    rate_limit:\n      unit: day\n      requests_per_unit: 100000000\n      algorithm: sliding_window_log\n", "descriptors[0].rate_limit.requests_per_unit", 6, "sliding_window_log"},
		{"a bucket too slow to refill", head + "  - key: k\n    rate_limit:\n      unit: year\n      requests_per_unit: 1\n      algorithm: token_bucket\n      burst: 100\n", "descriptors[0].rate_limit.burst", 8, "refill"},
		{"too deep", deepConfig(MaxDepth + 1), deepField(MaxDepth), 3 + MaxDepth*2, "deeper than 16"},
		{"too many", manyConfig(MaxDescriptors + 1), fmt.Sprintf("descriptors[%d]", MaxDescriptors), 3 + MaxDescriptors, "more than 10000 descriptors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", c)
			}
			if err.Code != contract.CodeInvalidArgument {
				t.Errorf("code %q", err.Code)
			}
			if err.Field != tt.field {
				t.Errorf("field %q, want %q (%v)", err.Field, tt.field, err)
			}
			prefix := fmt.Sprintf("line %d: ", tt.line)
			if tt.line == 0 && strings.HasPrefix(err.Message, "line ") || tt.line != 0 && !strings.HasPrefix(err.Message, prefix) {
				t.Errorf("message %q, want it to start with %q", err.Message, prefix)
			}
			if !strings.Contains(err.Message, tt.msg) {
				t.Errorf("message %q does not say %q", err.Message, tt.msg)
			}
		})
	}
}

// deepConfig nests n levels of descriptors, one per level.
func deepConfig(n int) string {
	var b strings.Builder
	b.WriteString("domain: deep\ndescriptors:\n")
	for i := range n {
		indent := strings.Repeat("  ", 2*i)
		fmt.Fprintf(&b, "%s  - key: k%d\n", indent, i)
		if i < n-1 {
			fmt.Fprintf(&b, "%s    descriptors:\n", indent)
		}
	}
	return b.String()
}

// deepField is the path of the list of descriptors at level n+1.
func deepField(n int) string {
	return strings.Repeat("descriptors[0].", n) + "descriptors"
}

// manyConfig has n descriptors at the top level.
func manyConfig(n int) string {
	var b strings.Builder
	b.WriteString("domain: many\ndescriptors:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - key: k%d\n", i)
	}
	return b.String()
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	u32 := func(v uint32) *uint32 { return &v }
	tests := []struct {
		name string
		yaml string
		want Config
	}{
		{"a domain alone", "domain: d", Config{Domain: "d"}},
		{"null and empty lists", "domain: d\ndescriptors: []\n", Config{Domain: "d"}},
		{"units in any case, stored upper-case", `
domain: d
descriptors:
  - {key: a, rate_limit: {unit: Second, requests_per_unit: 1}}
  - {key: b, rate_limit: {unit: mInUtE, requests_per_unit: 1}}
  - {key: c, rate_limit: {unit: WEEK, requests_per_unit: 1}}
`, Config{Domain: "d", Descriptors: []Descriptor{
			{Key: "a", RateLimit: &RateLimit{Unit: "SECOND", RequestsPerUnit: 1}},
			{Key: "b", RateLimit: &RateLimit{Unit: "MINUTE", RequestsPerUnit: 1}},
			{Key: "c", RateLimit: &RateLimit{Unit: "WEEK", RequestsPerUnit: 1}},
		}}},
		{"scalars as written into strings", `
domain: 42
descriptors:
  - key: status
    value: 200
  - key: ratio
    value: 1.50
  - key: flag
    value: yes
  - key: ip
    value: 50.0.0.5
`, Config{Domain: "42", Descriptors: []Descriptor{
			{Key: "status", Value: "200"}, {Key: "ratio", Value: "1.50"}, {Key: "flag", Value: "yes"}, {Key: "ip", Value: "50.0.0.5"},
		}}},
		{"YAML 1.1 booleans and null", `
domain: d
descriptors:
  - {key: a, shadow_mode: yes, detailed_metric: on}
  - {key: b, shadow_mode: no, detailed_metric: ~, rate_limit: ~, descriptors: ~, value: ~}
`, Config{Domain: "d", Descriptors: []Descriptor{
			{Key: "a", ShadowMode: true, DetailedMetric: true},
			{Key: "b"},
		}}},
		{"numbers", `
domain: d
descriptors:
  - {key: a, rate_limit: {unit: second, requests_per_unit: 0x10}}
  - {key: b, rate_limit: {unit: second, requests_per_unit: 1e3}}
  - {key: c, rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: token_bucket, burst: 1000}}
  - {key: d, rate_limit: {unit: second, requests_per_unit: 0}}
  - {key: e, rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: ~}}
`, Config{}},
		{"extensions", `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: leaky_bucket, burst: 20}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window_counter}
`, Config{Domain: "d", Descriptors: []Descriptor{
			{Key: "a", RateLimit: &RateLimit{Unit: "MINUTE", RequestsPerUnit: 10, Algorithm: "leaky_bucket", Burst: u32(20)}},
			{Key: "b", RateLimit: &RateLimit{Unit: "MINUTE", RequestsPerUnit: 10, Algorithm: "sliding_window_counter"}},
		}}},
		{"local_shares, with the defaults and with settings", `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1000, local_shares: {}}
  - key: b
    rate_limit:
      unit: second
      requests_per_unit: 1000
      algorithm: token_bucket
      local_shares: {ttl: 250ms, max_units: 50}
  - key: c
    rate_limit: {unit: second, requests_per_unit: 10, local_shares: ~}
`, Config{Domain: "d", Descriptors: []Descriptor{
			{Key: "a", RateLimit: &RateLimit{Unit: "SECOND", RequestsPerUnit: 1000, LocalShares: &LocalShares{}}},
			{Key: "b", RateLimit: &RateLimit{Unit: "SECOND", RequestsPerUnit: 1000, Algorithm: "token_bucket", LocalShares: &LocalShares{TTL: "250ms", MaxUnits: u32(50)}}},
			{Key: "c", RateLimit: &RateLimit{Unit: "SECOND", RequestsPerUnit: 10}},
		}}},
		{"unlimited with requests_per_unit", `
domain: d
descriptors:
  - {key: a, rate_limit: {unlimited: true, requests_per_unit: 5, name: n, replaces: [{name: m}]}}
`, Config{Domain: "d", Descriptors: []Descriptor{
			{Key: "a", RateLimit: &RateLimit{Unlimited: true, RequestsPerUnit: 5, Name: "n", Replaces: []Replace{{"m"}}}},
		}}},
		{"anchors, aliases and merge keys", `
domain: d
descriptors:
  - key: a
    rate_limit: &minute {unit: minute, requests_per_unit: 10}
  - key: b
    rate_limit: *minute
  - key: c
    rate_limit:
      <<: *minute
      requests_per_unit: 20
  - &leaf {key: e, value: v}
  - key: f
    descriptors: [*leaf]
`, Config{Domain: "d", Descriptors: []Descriptor{
			{Key: "a", RateLimit: &RateLimit{Unit: "MINUTE", RequestsPerUnit: 10}},
			{Key: "b", RateLimit: &RateLimit{Unit: "MINUTE", RequestsPerUnit: 10}},
			{Key: "c", RateLimit: &RateLimit{Unit: "MINUTE", RequestsPerUnit: 20}},
			{Key: "e", Value: "v"},
			{Key: "f", Descriptors: []Descriptor{{Key: "e", Value: "v"}}},
		}}},
		{"quota_mode and value_to_metric false, metadata empty: defaults that change nothing", `
domain: d
descriptors:
  - key: k
    quota_mode: false
    value_to_metric: no
    metadata: {}
    descriptors:
      - key: j
        quota_mode: null
        metadata:
        rate_limit: {unit: second, requests_per_unit: 1}
`, Config{Domain: "d", Descriptors: []Descriptor{{Key: "k", Descriptors: []Descriptor{{Key: "j", RateLimit: &RateLimit{Unit: "SECOND", RequestsPerUnit: 1}}}}}}},
		{"JSON", `{"domain": "d", "descriptors": [{"key": "k", "value": "v", "rate_limit": {"unit": "second", "requests_per_unit": 3}}]}`,
			Config{Domain: "d", Descriptors: []Descriptor{{Key: "k", Value: "v", RateLimit: &RateLimit{Unit: "SECOND", RequestsPerUnit: 3}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if tt.want.Domain != "" && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n got  %+v\n want %+v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate of what Parse returned: %v", err)
			}
		})
	}
}

// Parse's numbers, checked one by one.
func TestParseNumbers(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
domain: d
descriptors:
  - {key: a, rate_limit: {unit: second, requests_per_unit: 0x10}}
  - {key: b, rate_limit: {unit: second, requests_per_unit: 1e3}}
  - {key: c, rate_limit: {unit: second, requests_per_unit: 1_000}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint32{16, 1000, 1000} {
		if got := c.Descriptors[i].RateLimit.RequestsPerUnit; got != want {
			t.Errorf("descriptors[%d] requests_per_unit %d, want %d", i, got, want)
		}
	}
}

// Aliases and merge keys cannot make the walk exponential: descriptors
// reached through aliases count toward MaxDescriptors, and merges toward a
// budget of their own.
func TestParseBoundsAliasExpansion(t *testing.T) {
	t.Parallel()
	// Level i is a list of ten descriptors, each holding level i-1: a
	// million descriptors at level 6, within MaxDepth.
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - key: l0\n    descriptors: &l0 [{key: a}]\n")
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&b, "  - key: l%d\n    descriptors: &l%d [", i, i)
		for j := range 10 {
			fmt.Fprintf(&b, "{key: k%d, descriptors: *l%d}, ", j, i-1)
		}
		b.WriteString("]\n")
	}
	_, err := Parse([]byte(b.String()))
	if err == nil || !strings.Contains(err.Message, "more than 10000 descriptors") {
		t.Fatalf("Parse: %v", err)
	}

	// Each mapping merges the one before twice.
	b.Reset()
	b.WriteString("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      <<: &m0 {unit: second}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "      <<: &m%d {<<: [*m%d, *m%d]}\n", i, i-1, i-1)
	}
	_, err = Parse([]byte(b.String()))
	if err == nil || !strings.Contains(err.Message, "merge keys") {
		t.Fatalf("Parse: %v", err)
	}

	// Long values, each list reused nine times over, within MaxDescriptors:
	// a small document that used to become a domain of megabytes.
	b.Reset()
	long := strings.Repeat("v", MaxValueBytes-1)
	b.WriteString("domain: d\ndescriptors:\n  - key: l0\n    descriptors: &l0 [")
	for j := range 8 {
		fmt.Fprintf(&b, "{key: k, value: %s%d}, ", long, j)
	}
	b.WriteString("]\n")
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&b, "  - key: l%d\n    descriptors: &l%d [", i, i)
		for j := range 9 {
			fmt.Fprintf(&b, "{key: k, value: %s%d, descriptors: *l%d}, ", long, j, i-1)
		}
		b.WriteString("]\n")
	}
	if b.Len() > 64<<10 {
		t.Fatalf("the document is %d bytes; the point is a small one", b.Len())
	}
	_, err = Parse([]byte(b.String()))
	if err == nil || !strings.Contains(err.Message, "once anchors and aliases are expanded") {
		t.Fatalf("Parse of %d bytes expanding to megabytes: %v", b.Len(), err)
	}
}

func TestValidateWithoutLines(t *testing.T) {
	t.Parallel()
	rl := func(unit string, rpu uint32) *RateLimit { return &RateLimit{Unit: unit, RequestsPerUnit: rpu} }
	tests := []struct {
		name  string
		c     Config
		field string
	}{
		{"valid", Config{Domain: "d", Descriptors: []Descriptor{{Key: "k", RateLimit: rl("second", 1)}}}, ""},
		{"unit in lower case", Config{Domain: "d", Descriptors: []Descriptor{{Key: "k", RateLimit: rl("day", 1)}}}, ""},
		{"no domain", Config{}, "domain"},
		{"no key", Config{Domain: "d", Descriptors: []Descriptor{{}}}, "descriptors[0].key"},
		{"a bad unit", Config{Domain: "d", Descriptors: []Descriptor{{Key: "k", Descriptors: []Descriptor{{Key: "j", RateLimit: rl("eon", 1)}}}}}, "descriptors[0].descriptors[0].rate_limit.unit"},
		{"a duplicate", Config{Domain: "d", Descriptors: []Descriptor{{Key: "k"}, {Key: "k"}}}, "descriptors[1]"},
		{"too deep", func() Config {
			c, _ := Parse([]byte(deepConfig(MaxDepth)))
			leaf := &c.Descriptors[0]
			for len(leaf.Descriptors) > 0 {
				leaf = &leaf.Descriptors[0]
			}
			leaf.Descriptors = []Descriptor{{Key: "deeper"}}
			return c
		}(), deepField(MaxDepth)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || err.Field != tt.field || strings.HasPrefix(err.Message, "line ") {
				t.Fatalf("Validate: %#v, want an error on %q without a line", err, tt.field)
			}
		})
	}
	many := Config{Domain: "d", Descriptors: make([]Descriptor, MaxDescriptors+1)}
	for i := range many.Descriptors {
		many.Descriptors[i].Key = fmt.Sprint("k", i)
	}
	if err := many.Validate(); err == nil || err.Field != fmt.Sprintf("descriptors[%d]", MaxDescriptors) {
		t.Errorf("Validate of %d descriptors: %v", MaxDescriptors+1, err)
	}
}

func TestValidateEntries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []Entry
		field   string
	}{
		{"one entry", e("k", "v"), ""},
		{"an empty value", e("k", ""), ""},
		{"the longest key and value", e(strings.Repeat("k", MaxKeyBytes), strings.Repeat("v", MaxValueBytes)), ""},
		{"no entries", nil, "entries"},
		{"too many", make([]Entry, MaxDepth+1), "entries"},
		{"an empty key", e("k", "v", "", "v"), "entries[1].key"},
		{"a long key", e(strings.Repeat("k", MaxKeyBytes+1), "v"), "entries[0].key"},
		{"a long value", e("k", strings.Repeat("v", MaxValueBytes+1)), "entries[0].value"},
	}
	for _, tt := range tests {
		err := ValidateEntries(tt.entries)
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.field != "" && (err == nil || err.Field != tt.field):
			t.Errorf("%s: %v, want an error on %q", tt.name, err, tt.field)
		}
	}
}
