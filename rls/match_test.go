package rls

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
)

// A request descriptor matches level by level; the limit of the descriptor
// its last entry reaches applies, whatever the depth, up to MaxDepth.
func TestMatchNestingDepth(t *testing.T) {
	t.Parallel()
	d := compile(t, `
domain: nest
descriptors:
  - key: a
    value: "1"
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 2}
        descriptors:
          - key: c
            value: "3"
            rate_limit: {unit: second, requests_per_unit: 3}
`)
	checkHits(t, d, []hit{
		{entries: e("a", "1"), limit: "1/SECOND", path: "a_1"},
		{entries: e("a", "1", "b", "x"), limit: "2/SECOND", path: "a_1.b"},
		{entries: e("a", "1", "b", "x", "c", "3"), limit: "3/SECOND", path: "a_1.b.c_3"},
		{entries: e("a", "1", "b", "x", "c", "4")},
		{entries: e("a", "2", "b", "x")},
		// The order of the entries is the order of the levels.
		{entries: e("b", "x", "a", "1")},
	})

	// MaxDepth levels match; one more is refused.
	var b strings.Builder
	b.WriteString("domain: deep\ndescriptors:\n")
	for i := range MaxDepth {
		indent := strings.Repeat("  ", 2*i)
		fmt.Fprintf(&b, "%s  - key: k%d\n", indent, i)
		if i == MaxDepth-1 {
			fmt.Fprintf(&b, "%s    rate_limit: {unit: second, requests_per_unit: 7}\n", indent)
		} else {
			fmt.Fprintf(&b, "%s    descriptors:\n", indent)
		}
	}
	deep := compile(t, b.String())
	var entries []Entry
	for i := range MaxDepth {
		entries = append(entries, Entry{fmt.Sprintf("k%d", i), "v"})
	}
	checkHits(t, deep, []hit{{entries: entries, limit: "7/SECOND", path: deepPath(MaxDepth)}})
	if err := ValidateEntries(entries); err != nil {
		t.Errorf("ValidateEntries of %d entries: %v", MaxDepth, err)
	}
	if err := ValidateEntries(append(entries, Entry{"k", "v"})); err == nil || err.Field != "entries" {
		t.Errorf("ValidateEntries of %d entries: %v, want an error on entries", MaxDepth+1, err)
	}
}

func deepPath(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("k%d", i)
	}
	return strings.Join(parts, ".")
}

// At each level the key and value are tried first, then the wildcards, then
// the key alone; config order does not change that.
func TestMatchKeyAndValueBeforeKeyOnly(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"key-only first", "key-only last"} {
		keyOnly := "  - key: ip\n    rate_limit: {unit: second, requests_per_unit: 10}\n"
		wild := "  - key: ip\n    value: 10.*\n    rate_limit: {unit: second, requests_per_unit: 20}\n"
		exact := "  - key: ip\n    value: 10.0.0.1\n    rate_limit: {unit: second, requests_per_unit: 30}\n"
		body := keyOnly + wild + exact
		if order == "key-only last" {
			body = exact + wild + keyOnly
		}
		d := compile(t, "domain: d\ndescriptors:\n"+body)
		t.Run(order, func(t *testing.T) {
			checkHits(t, d, []hit{
				{entries: e("ip", "10.0.0.1"), limit: "30/SECOND", path: "ip_10.0.0.1"},
				{entries: e("ip", "10.0.0.2"), limit: "20/SECOND", path: "ip_10.*"},
				{entries: e("ip", "192.168.0.1"), limit: "10/SECOND", path: "ip"},
				// An empty value matches a key without a value.
				{entries: e("ip", ""), limit: "10/SECOND", path: "ip"},
			})
		})
	}
	// A request value equal to a wildcard pattern matches it exactly; an
	// empty request value is matched by a pattern of "*" before the key
	// alone, as in the reference (it looks up "ip_" there).
	d := compile(t, `
domain: d
descriptors:
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: ip
    value: "*"
    rate_limit: {unit: second, requests_per_unit: 20}
`)
	checkHits(t, d, []hit{
		{entries: e("ip", ""), limit: "20/SECOND", path: "ip_*"},
		{entries: e("ip", "*"), limit: "20/SECOND", path: "ip_*"},
	})
}

// A key without a value matches every value, and each value counts on its
// own counter.
func TestMatchKeyOnlyCountsEachValue(t *testing.T) {
	t.Parallel()
	d := compile(t, `
domain: per_user
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 60}
`)
	values := []string{"alice", "bob", "", "alice ", "ALICE", "a:b", "5:alice"}
	keys := map[string]string{}
	for _, v := range values {
		entries := e("user", v)
		checkHits(t, d, []hit{{entries: entries, limit: "60/MINUTE", path: "user"}})
		k := key(d, entries)
		if other, ok := keys[k]; ok {
			t.Errorf("user=%q and user=%q count on one counter %q", v, other, k)
		}
		keys[k] = v
	}
}

// Wildcards: '*' anywhere in the value, each matching zero or more bytes;
// the first of a level's patterns (in configuration order) that matches
// wins; the key is compared exactly, and the pattern against the value
// only.
func TestMatchWildcards(t *testing.T) {
	t.Parallel()
	d := compile(t, `
domain: wild
descriptors:
  - key: path
    value: /api/v1/*
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value: "*.png"
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value: /a*b*c
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: path
    value: "ab*ba"
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: a
    value: b*
    rate_limit: {unit: second, requests_per_unit: 6}
  - key: nested
    value: "n*"
    descriptors:
      - key: leaf
        value: "*x"
        rate_limit: {unit: second, requests_per_unit: 7}
`)
	checkHits(t, d, []hit{
		{entries: e("path", "/api/v1/users"), limit: "1/SECOND", path: "path_/api/v1/*"},
		{entries: e("path", "/api/v1/"), limit: "1/SECOND", path: "path_/api/v1/*"},
		{entries: e("path", "/api/v2/users"), limit: "2/SECOND", path: "path_/api/*"},
		// Both /api/* and *.png match: the first in order wins.
		{entries: e("path", "/api/logo.png"), limit: "2/SECOND", path: "path_/api/*"},
		{entries: e("path", "/img/logo.png"), limit: "3/SECOND", path: "path_*.png"},
		{entries: e("path", ".png"), limit: "3/SECOND", path: "path_*.png"},
		{entries: e("path", "/abc"), limit: "4/SECOND", path: "path_/a*b*c"},
		{entries: e("path", "/a-b-c"), limit: "4/SECOND", path: "path_/a*b*c"},
		{entries: e("path", "/acb")},
		{entries: e("path", "/a-c-b")},
		// The prefix and the suffix may not overlap.
		{entries: e("path", "aba")},
		{entries: e("path", "abba"), limit: "5/SECOND", path: "path_ab*ba"},
		{entries: e("path", "other")},
		// The reference matches "a_b*" against "a_bc" and, wrongly, also
		// against key "a_b" with value "c..." ("a_b_c..."): not limitnode.
		{entries: e("a", "bc"), limit: "6/SECOND", path: "a_b*"},
		{entries: e("a_b", "c")},
		{entries: e("nested", "nope", "leaf", "box"), limit: "7/SECOND", path: "nested_n*.leaf_*x"},
		{entries: e("nested", "nope", "leaf", "boy")},
	})
}

// share_threshold: every value a share_threshold wildcard matches counts on
// one counter, whether the limit is on the wildcard or below it; other
// entries keep their own values.
func TestMatchShareThreshold(t *testing.T) {
	t.Parallel()
	d := compile(t, `
domain: share
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: file
    value: test1
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: file
    value: test*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: user
    value: user/*
    share_threshold: true
    descriptors:
      - key: resource
        value: res/*
        share_threshold: true
        descriptors:
          - key: action
            rate_limit: {unit: minute, requests_per_unit: 150}
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        descriptors:
          - key: type
            rate_limit: {unit: minute, requests_per_unit: 120}
  - key: mid
    value: /api*v1
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 80}
`)
	checkHits(t, d, []hit{
		{entries: e("files", "files/a.pdf"), limit: "100/MINUTE", path: "files_files/*", shared: []string{"files/*"}},
		// An exact value wins over the wildcard and counts on its own.
		{entries: e("file", "test1"), limit: "50/MINUTE", path: "file_test1"},
		{entries: e("file", "test2"), limit: "100/MINUTE", path: "file_test*", shared: []string{"test*"}},
		{entries: e("user", "user/1", "resource", "res/a", "action", "read"), limit: "150/MINUTE", path: "user_user/*.resource_res/*.action", shared: []string{"user/*", "res/*", ""}},
		{entries: e("path", "path/x", "file", "file/y", "type", "pdf"), limit: "120/MINUTE", path: "path_path/*.file_file/*.type", shared: []string{"path/*", "", ""}},
		{entries: e("mid", "/api/v1"), limit: "80/MINUTE", path: "mid_/api*v1", shared: []string{"/api*v1"}},
	})
	tests := []struct {
		name string
		a, b []Entry
		same bool
	}{
		{"two files", e("files", "files/a.pdf"), e("files", "files/b.csv"), true},
		{"the exact value and a wildcard value", e("file", "test1"), e("file", "test2"), false},
		{"two values of the wildcard", e("file", "test2"), e("file", "test3"), true},
		{"two users and resources, one action", e("user", "user/1", "resource", "res/a", "action", "read"), e("user", "user/2", "resource", "res/b", "action", "read"), true},
		{"two actions", e("user", "user/1", "resource", "res/a", "action", "read"), e("user", "user/1", "resource", "res/a", "action", "write"), false},
		{"two paths, one file", e("path", "path/x", "file", "file/y", "type", "pdf"), e("path", "path/z", "file", "file/y", "type", "pdf"), true},
		{"two files without share_threshold", e("path", "path/x", "file", "file/y", "type", "pdf"), e("path", "path/x", "file", "file/z", "type", "pdf"), false},
		{"middle wildcard", e("mid", "/api/v1"), e("mid", "/api/internal/v1"), true},
	}
	for _, tt := range tests {
		ka, kb := key(d, tt.a), key(d, tt.b)
		if ka == "" || kb == "" || (ka == kb) != tt.same {
			t.Errorf("%s: counter keys %q and %q, want same=%v", tt.name, ka, kb, tt.same)
		}
	}
}

// unlimited: the descriptor matches with an unlimited limit, which replaces
// like any other and has no limit to decide.
func TestMatchUnlimited(t *testing.T) {
	t.Parallel()
	d := compile(t, `
domain: u
descriptors:
  - key: internal
    rate_limit:
      unlimited: true
      replaces: [{name: per_user}]
  - key: user
    rate_limit: {name: per_user, unit: second, requests_per_unit: 5}
`)
	checkHits(t, d, []hit{
		{entries: e("internal", "x"), limit: "unlimited", path: "internal", replaces: []string{"per_user"}},
		{entries: e("user", "x"), limit: "5/SECOND", path: "user", name: "per_user", metered: true},
	})
	if _, ok := Limit(d.Match(e("internal", "x")).RateLimit); ok {
		t.Error("Limit of unlimited is ok")
	}
	got := applyReplaces([]Match{d.Match(e("internal", "x")), d.Match(e("user", "x"))})
	if want := []string{"unlimited", "replaced"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("replaces by an unlimited limit: %q, want %q", got, want)
	}
}

// replaces: Match reports the limit's name and what it replaces; the caller
// drops, across one request's descriptors, the named limits another
// matched limit replaces.
func TestMatchReplaces(t *testing.T) {
	t.Parallel()
	d := compile(t, `
domain: r
descriptors:
  - key: category
    value: read
    rate_limit: {name: reads, unit: second, requests_per_unit: 100}
  - key: endpoint
    value: /search
    rate_limit:
      unit: second
      requests_per_unit: 500
      replaces: [{name: reads}, {name: writes}]
  - key: endpoint
    value: /other
    rate_limit: {name: other, unit: second, requests_per_unit: 1, replaces: [{name: reads}]}
`)
	read, search, other := e("category", "read"), e("endpoint", "/search"), e("endpoint", "/other")
	checkHits(t, d, []hit{
		{entries: read, limit: "100/SECOND", path: "category_read", name: "reads", metered: true},
		{entries: search, limit: "500/SECOND", path: "endpoint_/search", replaces: []string{"reads", "writes"}},
		{entries: other, limit: "1/SECOND", path: "endpoint_/other", name: "other", metered: true, replaces: []string{"reads"}},
	})
	tests := []struct {
		name    string
		request [][]Entry
		want    string
	}{
		{"no replacement", [][]Entry{read}, "[100/SECOND]"},
		{"replaced", [][]Entry{read, search}, "[replaced 500/SECOND]"},
		{"replaced twice", [][]Entry{read, search, other}, "[replaced 500/SECOND 1/SECOND]"},
		{"a replacing limit without a match", [][]Entry{search}, "[500/SECOND]"},
	}
	for _, tt := range tests {
		var ms []Match
		for _, entries := range tt.request {
			ms = append(ms, d.Match(entries))
		}
		if got := fmt.Sprint(applyReplaces(ms)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// shadow_mode belongs to the descriptor that holds the limit.
func TestMatchShadowMode(t *testing.T) {
	t.Parallel()
	d := compile(t, `
domain: s
descriptors:
  - key: tenant
    shadow_mode: true
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 1}
      - key: bot
        shadow_mode: true
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: tenant
    value: big
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 3}
`)
	checkHits(t, d, []hit{
		{entries: e("tenant", "a", "user", "u"), limit: "1/SECOND", path: "tenant.user"},
		{entries: e("tenant", "a", "bot", "b"), limit: "2/SECOND", path: "tenant.bot", shadow: true},
		{entries: e("tenant", "big"), limit: "3/SECOND", path: "tenant_big", shadow: true},
		// A shadowed descriptor without a limit matches nothing.
		{entries: e("tenant", "a")},
	})
}

// A rate_limit's local_shares reach its matches compiled against its
// limit (the defaults filled in where asked); a limit without them, and a
// nested descriptor under one with them, has none.
func TestMatchLocalShares(t *testing.T) {
	t.Parallel()
	d := compile(t, `
domain: s
descriptors:
  - key: api_key
    rate_limit: {unit: second, requests_per_unit: 1000, local_shares: {}}
    descriptors:
      - key: path
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 600, algorithm: token_bucket, burst: 100, local_shares: {ttl: 250ms, max_units: 50}}
`)
	tests := []struct {
		name     string
		entries  []Entry
		ttl      time.Duration
		maxUnits int64 // of the limit, the default filled in; 0: no shares
	}{
		{"the defaults", e("api_key", "a"), contract.DefaultShareTTL, 125},
		{"settings", e("user", "u"), 250 * time.Millisecond, 50},
		{"a nested limit without them", e("api_key", "a", "path", "/"), 0, 0},
	}
	for _, tt := range tests {
		m := d.Match(tt.entries)
		switch {
		case tt.maxUnits == 0 && m.Shares != nil:
			t.Errorf("%s: shares %+v, want none", tt.name, m.Shares)
		case tt.maxUnits == 0:
		case m.Shares == nil:
			t.Errorf("%s: no shares", tt.name)
		case m.Shares.TTLOrDefault() != tt.ttl || m.Shares.MaxUnitsOf(m.Limit) != tt.maxUnits:
			t.Errorf("%s: ttl %s max_units %d, want %s and %d", tt.name, m.Shares.TTLOrDefault(), m.Shares.MaxUnitsOf(m.Limit), tt.ttl, tt.maxUnits)
		}
	}
}

// detailed_metric and a name mark a limit as metered; the path stays the
// configuration's.
func TestMatchMetered(t *testing.T) {
	t.Parallel()
	d := compile(t, `
domain: m
descriptors:
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: named
    rate_limit: {name: n, unit: second, requests_per_unit: 3}
  - key: parent
    detailed_metric: true
    descriptors:
      - key: child
        rate_limit: {unit: second, requests_per_unit: 4}
  - key: wild
    value: w*
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 5}
`)
	checkHits(t, d, []hit{
		{entries: e("plain", "x"), limit: "1/SECOND", path: "plain"},
		{entries: e("detailed", "x"), limit: "2/SECOND", path: "detailed", metered: true},
		{entries: e("named", "x"), limit: "3/SECOND", path: "named", name: "n", metered: true},
		// detailed_metric counts on the descriptor that holds the limit.
		{entries: e("parent", "x", "child", "y"), limit: "4/SECOND", path: "parent.child"},
		{entries: e("wild", "wxyz"), limit: "5/SECOND", path: "wild_w*", metered: true},
	})
}

// A request deeper than the configuration matches nothing, even when a
// limit sits on the way; so does one that stops above the limit.
func TestMatchDeeperOrShallowerThanConfig(t *testing.T) {
	t.Parallel()
	d := compile(t, `
domain: depth
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: b
    descriptors:
      - key: c
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: x
    rate_limit: {unit: second, requests_per_unit: 3}
    descriptors:
      - key: "y"
        rate_limit: {unit: second, requests_per_unit: 4}
`)
	checkHits(t, d, []hit{
		{entries: e("a", "1"), limit: "1/SECOND", path: "a"},
		{entries: e("a", "1", "b", "2")},
		{entries: e("a", "1", "z", "2")},
		{entries: e("b", "1")},
		{entries: e("b", "1", "c", "2"), limit: "2/SECOND", path: "b.c"},
		{entries: e("b", "1", "c", "2", "d", "3")},
		{entries: e("x", "1"), limit: "3/SECOND", path: "x"},
		{entries: e("x", "1", "y", "2"), limit: "4/SECOND", path: "x.y"},
		{entries: e("x", "1", "z", "2")},
		{entries: nil},
	})
}

// The reference matches "key_value" strings; limitnode compares key and
// value, so descriptors it would merge stay apart, and '*' in a key is
// refused rather than silently matched differently.
func TestMatchKeyAndValueStayApart(t *testing.T) {
	t.Parallel()
	d := compile(t, `
domain: apart
descriptors:
  - key: a
    value: b_c
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a_b
    value: c
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: k_v
    rate_limit: {unit: second, requests_per_unit: 3}
`)
	checkHits(t, d, []hit{
		{entries: e("a", "b_c"), limit: "1/SECOND", path: "a_b_c"},
		{entries: e("a_b", "c"), limit: "2/SECOND", path: "a_b_c"},
		// The reference would find key-only "k_v" for ("k", "v").
		{entries: e("k", "v")},
		{entries: e("k_v", "anything"), limit: "3/SECOND", path: "k_v"},
	})
	if key(d, e("a", "b_c")) == key(d, e("a_b", "c")) {
		t.Error("(a, b_c) and (a_b, c) count on one counter")
	}
}

// Match allocates nothing unless it reports Shared, and is safe for
// concurrent use.
func TestMatchAllocatesNothingAndIsConcurrent(t *testing.T) {
	d := example(t, 9)
	entries := e("route", "/api/v1/resource/123/action")
	if n := testing.AllocsPerRun(100, func() { d.Match(entries) }); n != 0 {
		t.Errorf("Match allocates %v times", n)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if d.Match(entries).RateLimit == nil {
					t.Error("no match")
					return
				}
			}
		})
	}
	wg.Wait()
}

// Compile keeps its own copy: changing the Config afterwards changes
// nothing.
func TestCompileCopiesTheConfig(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Compile(&c)
	if err != nil {
		t.Fatal(err)
	}
	c.Descriptors[0].RateLimit.RequestsPerUnit = 99
	c.Descriptors[0].Key = "other"
	if got := d.Match(e("k", "v")); got.RateLimit == nil || got.RateLimit.RequestsPerUnit != 1 {
		t.Errorf("after changing the Config: %+v", got)
	}
	if d.Config().Descriptors[0].Key != "k" {
		t.Error("Config() changed with the Config compiled")
	}
	// Compile validates.
	if _, err := Compile(&Config{}); err == nil || err.Field != "domain" {
		t.Errorf("Compile of an empty Config: %v", err)
	}
	// Compile stores units in upper case.
	lower := Config{Domain: "d", Descriptors: []Descriptor{{Key: "k", RateLimit: &RateLimit{Unit: "minute", RequestsPerUnit: 1}}}}
	d, err = Compile(&lower)
	if err != nil {
		t.Fatal(err)
	}
	if u := d.Config().Descriptors[0].RateLimit.Unit; u != "MINUTE" || lower.Descriptors[0].RateLimit.Unit != "minute" {
		t.Errorf("unit %q in the Domain, %q in the Config", u, lower.Descriptors[0].RateLimit.Unit)
	}
}
