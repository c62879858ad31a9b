package httpapi

import (
	"strings"
	"testing"
)

func TestFieldAtNamesTheValueEndingThere(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body  string
		value string // the value's text, found in body
		want  string
	}{
		{`{"key":"a","limit":{"rate":"x"}}`, `"x"`, "limit.rate"},
		{`{"checks":[{"key":"a"},{"key":"b","limit":{"rate":true}}]}`, `true`, "checks[1].limit.rate"},
		{`{"a":[[1,2],[3,"four"]]}`, `"four"`, "a[1][1]"},
		{`{"a":{"b":[]},"c":{"d":{}},"e":7}`, `7`, "e"},
		{`"top"`, `"top"`, ""},
	}
	for _, tt := range tests {
		end := int64(strings.LastIndex(tt.body, tt.value) + len(tt.value))
		if got, ok := fieldAt([]byte(tt.body), end); !ok || got != tt.want {
			t.Errorf("fieldAt(%s, end of %s) = %q, %v; want %q", tt.body, tt.value, got, ok, tt.want)
		}
	}
	if got, ok := fieldAt([]byte(`{"a":1}`), 3); ok {
		t.Errorf("fieldAt in the middle of a name = %q, want none", got)
	}
}
