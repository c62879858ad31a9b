package rls

import (
	"slices"
	"testing"
)

// The tests of this file follow the examples of the "Configuration" section
// of envoyproxy/ratelimit's README, each against testdata/examples/.

// Example 1: two values of one key, each with its own limit; another value
// of the key matches nothing.
func TestExample1TwoValuesOfOneKey(t *testing.T) {
	t.Parallel()
	d := example(t, 1)
	checkHits(t, d, []hit{
		{entries: e("database", "users"), limit: "500/SECOND", path: "database_users"},
		{entries: e("database", "default"), limit: "500/SECOND", path: "database_default"},
		{entries: e("database", "orders")},
		{entries: e("db", "users")},
	})
	if key(d, e("database", "users")) == key(d, e("database", "default")) {
		t.Error("two configured values count on one counter")
	}
}

// Example 2: a placeholder without a limit leads to a nested key without a
// value, which limits each number separately; the same key at the top level
// is another rule, and a request may carry both descriptors.
func TestExample2NestedListAndMultipleDescriptors(t *testing.T) {
	t.Parallel()
	d := example(t, 2)
	checkHits(t, d, []hit{
		{entries: e("message_type", "marketing", "to_number", "2061111111"), limit: "5/DAY", path: "message_type_marketing.to_number"},
		{entries: e("message_type", "marketing", "to_number", "2062222222"), limit: "5/DAY", path: "message_type_marketing.to_number"},
		{entries: e("to_number", "2061111111"), limit: "100/DAY", path: "to_number"},
		// The placeholder alone has no limit.
		{entries: e("message_type", "marketing")},
		// Another message type has no nested list.
		{entries: e("message_type", "transactional", "to_number", "2061111111")},
	})
	// Each number counts separately, at both levels.
	a, b := e("message_type", "marketing", "to_number", "2061111111"), e("message_type", "marketing", "to_number", "2062222222")
	if key(d, a) == key(d, b) {
		t.Error("two numbers count on one counter under message_type=marketing")
	}
	if key(d, e("to_number", "2061111111")) == key(d, e("to_number", "2062222222")) {
		t.Error("two numbers count on one counter at the top level")
	}
	// One request, both descriptors: both limits apply, on different counters.
	if key(d, a) == key(d, e("to_number", "2061111111")) {
		t.Error("the nested and the top-level rule count on one counter")
	}
}

// Example 3: key and value are tried before the key alone; a limit of 0
// requests refuses every request (Limit says there is nothing to decide).
func TestExample3MostSpecificMatchFirst(t *testing.T) {
	t.Parallel()
	d := example(t, 3)
	checkHits(t, d, []hit{
		{entries: e("remote_address", "50.0.0.1"), limit: "10/SECOND", path: "remote_address"},
		{entries: e("remote_address", "50.0.0.5"), limit: "0/SECOND", path: "remote_address_50.0.0.5"},
	})
	if _, ok := Limit(d.Match(e("remote_address", "50.0.0.5")).RateLimit); ok {
		t.Error("Limit of requests_per_unit 0 is ok; the caller must deny without state")
	}
	if l, ok := Limit(d.Match(e("remote_address", "50.0.0.1")).RateLimit); !ok || l.Rate != 10 {
		t.Errorf("Limit of the key-only rule = %+v, %v", l, ok)
	}
}

// Example 4: a request descriptor matches only a limit at its own depth.
func TestExample4DepthMustMatch(t *testing.T) {
	t.Parallel()
	shallow := compile(t, `
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
`)
	request := e("key", "value", "subkey", "subvalue")
	checkHits(t, shallow, []hit{
		{entries: request},
		{entries: e("key", "value"), limit: "300/SECOND", path: "key_value"},
	})
	checkHits(t, example(t, 4), []hit{
		{entries: request, limit: "300/SECOND", path: "key_value.subkey"},
		{entries: e("key", "value")},
	})
}

// Example 5: an unlimited descriptor matches (unlike one that is not
// configured) and is never limited.
func TestExample5Unlimited(t *testing.T) {
	t.Parallel()
	d := example(t, 5)
	checkHits(t, d, []hit{
		{entries: e("ldap", "anyone"), limit: "unlimited", path: "ldap"},
		{entries: e("azure", "anyone"), limit: "100/MINUTE", path: "azure"},
		{entries: e("gcp", "anyone")},
	})
	if _, ok := Limit(d.Match(e("ldap", "x")).RateLimit); ok {
		t.Error("Limit of an unlimited rate_limit is ok")
	}
}

// Example 6: shadow_mode on user-a only.
func TestExample6ShadowMode(t *testing.T) {
	t.Parallel()
	checkHits(t, example(t, 6), []hit{
		{entries: e("service", "auth-service", "user", "user-a"), limit: "10/SECOND", path: "service.user_user-a", shadow: true},
		{entries: e("service", "auth-service", "user", "user-b"), limit: "20/SECOND", path: "service.user_user-b"},
		{entries: e("service", "auth-service", "user", "user-c")},
	})
}

// Example 7: when a request matches a limit and another that replaces it,
// only the replacing one applies; alone, the replaced one applies.
func TestExample7Replaces(t *testing.T) {
	t.Parallel()
	d := example(t, 7)
	one := e("key_1", "value_1", "user", "bkthomps")
	two := e("key_2", "value_2", "user", "bkthomps")
	checkHits(t, d, []hit{
		{entries: one, limit: "5/SECOND", path: "key_1_value_1.user_bkthomps", name: "specific_limit", metered: true},
		{entries: two, limit: "10/SECOND", path: "key_2_value_2.user_bkthomps", replaces: []string{"specific_limit"}},
	})
	tests := []struct {
		name    string
		request [][]Entry
		want    []string
	}{
		{"the named limit alone", [][]Entry{one}, []string{"5/SECOND"}},
		{"the replacing limit alone", [][]Entry{two}, []string{"10/SECOND"}},
		{"both: the named one is replaced", [][]Entry{one, two}, []string{"replaced", "10/SECOND"}},
		{"order does not matter", [][]Entry{two, one}, []string{"10/SECOND", "replaced"}},
	}
	for _, tt := range tests {
		var ms []Match
		for _, entries := range tt.request {
			ms = append(ms, d.Match(entries))
		}
		if got := applyReplaces(ms); !slices.Equal(got, tt.want) {
			t.Errorf("%s: limits %q, want %q", tt.name, got, tt.want)
		}
	}
}

// Example 8: detailed_metric on a key without a value. limitnode keeps the
// metric path from the configuration and marks the limit as metered.
func TestExample8DetailedMetric(t *testing.T) {
	t.Parallel()
	d := example(t, 8)
	checkHits(t, d, []hit{
		{entries: e("key1", "unspecified_value"), limit: "10/MINUTE", path: "key1", metered: true},
		{entries: e("key1", "unspecified_value2"), limit: "10/MINUTE", path: "key1", metered: true},
		{entries: e("key1", "value1"), limit: "20/MINUTE", path: "key1_value1"},
	})
	if key(d, e("key1", "unspecified_value")) == key(d, e("key1", "unspecified_value2")) {
		t.Error("two values of a key without a value count on one counter")
	}
}

// Example 9: wildcards trailing, in the middle, and several.
func TestExample9Wildcards(t *testing.T) {
	t.Parallel()
	d := example(t, 9)
	checkHits(t, d, []hit{
		{entries: e("key1", "value1"), limit: "20/MINUTE", path: "key1_value*"},
		{entries: e("key1", "valueXYZ"), limit: "20/MINUTE", path: "key1_value*"},
		{entries: e("key1", "value"), limit: "20/MINUTE", path: "key1_value*"},
		{entries: e("key1", "valu")},
		{entries: e("path", "/api/123/action"), limit: "20/MINUTE", path: "path_/api/*/action"},
		{entries: e("path", "/api/user-id/action"), limit: "20/MINUTE", path: "path_/api/*/action"},
		{entries: e("path", "/api/123/other")},
		{entries: e("route", "/api/v1/resource/123/action"), limit: "20/MINUTE", path: "route_/api/*/resource/*/action"},
		{entries: e("route", "/api/v2/resource/456/action"), limit: "20/MINUTE", path: "route_/api/*/resource/*/action"},
		{entries: e("route", "/api/v1/action")},
	})
	// Without share_threshold each value counts on its own.
	if key(d, e("key1", "value1")) == key(d, e("key1", "value2")) {
		t.Error("two values of a wildcard without share_threshold count on one counter")
	}
}

// Example 10 (without value_to_metric): keys without values at three levels,
// and a wildcard in the middle of the path.
func TestExample10NestedKeysAndWildcard(t *testing.T) {
	t.Parallel()
	checkHits(t, example(t, 10), []hit{
		{entries: e("route", "api", "http_method", "GET", "subject_id", "123"), limit: "60/MINUTE", path: "route.http_method.subject_id"},
		{entries: e("route", "web", "http_method", "POST", "subject_id", "456"), limit: "60/MINUTE", path: "route.http_method.subject_id"},
		{entries: e("route", "api", "http_method", "GET")},
		{entries: e("user", "alice", "action", "readfile", "resource", "documents"), limit: "100/MINUTE", path: "user.action_read*.resource"},
		{entries: e("user", "alice", "action", "write", "resource", "documents")},
	})
}

// Example 11: share_threshold makes every value of a wildcard count on one
// counter; without it each value has its own.
func TestExample11ShareThreshold(t *testing.T) {
	t.Parallel()
	d := example(t, 11)
	checkHits(t, d, []hit{
		{entries: e("files", "files/a.pdf"), limit: "10/HOUR", path: "files_files/*", shared: []string{"files/*"}},
		{entries: e("files_no_share", "files_no_share/a.pdf"), limit: "10/HOUR", path: "files_no_share_files_no_share/*"},
		{entries: e("route", "api/v1", "method", "GET"), limit: "60/MINUTE", path: "route_api/*.method", shared: []string{"api/*", ""}},
	})
	shared := key(d, e("files", "files/a.pdf"))
	for _, v := range []string{"files/b.csv", "files/c.txt", "files/"} {
		if got := key(d, e("files", v)); got != shared {
			t.Errorf("files=%s counts on %q, files/a.pdf on %q", v, got, shared)
		}
	}
	if key(d, e("files_no_share", "files_no_share/a.pdf")) == key(d, e("files_no_share", "files_no_share/b.csv")) {
		t.Error("values of a wildcard without share_threshold count on one counter")
	}
	// Above the limit: the route shares, the method does not.
	if key(d, e("route", "api/v1", "method", "GET")) != key(d, e("route", "api/v2", "method", "GET")) {
		t.Error("two routes under api/* count on two counters")
	}
	if key(d, e("route", "api/v1", "method", "GET")) == key(d, e("route", "api/v1", "method", "POST")) {
		t.Error("two methods count on one counter")
	}
}
