package contract

import (
	"strings"
	"testing"
	"time"
)

// TestTextFieldsHoldOnlyVisibleText: a block's reason is refused, naming
// the field, when it holds a character that changes how it reads without
// showing itself; visible text in any script, emoji and spaces pass. A
// logged entry with such a reason is still accepted by ValidateEntry, so a
// node replaying one decides as the nodes that applied it.
func TestTextFieldsHoldOnlyVisibleText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, reason string
		ok           bool
	}{
		{"plain text", "too many logins from one address", true},
		{"other scripts and emoji", "trop de requêtes — слишком много 🚫 عدد كبير", true},
		{"an empty reason", "", true},
		{"a right-to-left override", "abuse\u202eesuba", false},
		{"a left-to-right isolate", "a\u2066b\u2069", false},
		{"a right-to-left mark", "a\u200fb", false},
		{"an Arabic letter mark", "a\u061cb", false},
		{"a zero width space", "ab\u200buse", false},
		{"a zero width joiner", "a\u200db", false},
		{"a byte order mark", "\ufeffabuse", false},
		{"a soft hyphen", "ab\u00aduse", false},
		{"a line separator", "a\u2028b", false},
		{"a paragraph separator", "a\u2029b", false},
		{"a newline", "a\nb", false},
		{"a tab", "a\tb", false},
		{"invalid UTF-8", "a\xffb", false},
		{"over the bound", strings.Repeat("x", MaxBlockReasonBytes+1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := BlockRequest{Key: "k", Reason: tt.reason, TTL: time.Hour}
			err := req.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate(%q) = %v, want ok %v", tt.reason, err, tt.ok)
			}
			if err != nil && err.Field != "reason" {
				t.Fatalf("the error names %q, want reason: %v", err.Field, err)
			}
		})
	}
	logged := BlockRequest{Key: "k", Reason: "abuse\u202eesuba", TTL: time.Hour}
	if err := logged.ValidateEntry(); err != nil {
		t.Fatalf("a logged entry with a bidirectional control: %v, want it accepted as it was", err)
	}
}
