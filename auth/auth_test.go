package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func tokenFile(entries ...string) string {
	return `{"tokens": [` + strings.Join(entries, ",") + `]}`
}

func tokenEntry(name, hash string, roles ...string) string {
	return fmt.Sprintf(`{"name": %q, "sha256": %q, "roles": ["%s"]}`, name, hash, strings.Join(roles, `","`))
}

func TestAuthorizeByRole(t *testing.T) {
	t.Parallel()
	decideToken, decideHash := NewToken()
	readToken, readHash := NewToken()
	adminToken, adminHash := NewToken()
	tokens, err := Parse(strings.NewReader(tokenFile(
		tokenEntry("checkout", decideHash, "decide"),
		tokenEntry("dashboards", readHash, "read"),
		tokenEntry("ops", adminHash, "admin"),
	)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		token    string
		role     Role
		wantName string
		wantErr  error
	}{
		{"no token", "", RoleDecide, "", ErrNoToken},
		{"an unknown token", "ln_nope", RoleRead, "", ErrUnknownToken},
		{"a decide token decides", decideToken, RoleDecide, "checkout", nil},
		{"a decide token cannot read", decideToken, RoleRead, "checkout", ErrPermissionDenied},
		{"a read token reads", readToken, RoleRead, "dashboards", nil},
		{"a read token cannot administer", readToken, RoleAdmin, "dashboards", ErrPermissionDenied},
		{"admin implies decide", adminToken, RoleDecide, "ops", nil},
		{"admin implies read", adminToken, RoleRead, "ops", nil},
		{"a token's hash is not a token", decideHash, RoleDecide, "", ErrUnknownToken},
	}
	for _, tt := range tests {
		name, err := tokens.Authorize(tt.token, tt.role)
		if name != tt.wantName || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("%s: %q, %v; want %q, %v", tt.name, name, err, tt.wantName, tt.wantErr)
		}
	}
}

func TestParseRefusesBadEntriesNamingThem(t *testing.T) {
	t.Parallel()
	_, hash := NewToken()
	tests := []struct {
		name, file, wantInError string
	}{
		{"an unknown role", tokenFile(tokenEntry("ci", hash, "superuser")), `tokens[0] ("ci"): unknown role "superuser"`},
		{"a short hash", tokenFile(tokenEntry("ci", hash[:63], "read")), `tokens[0] ("ci"): sha256 must be 64 hex digits`},
		{"a hash that is not hex", tokenFile(tokenEntry("ci", strings.Repeat("z", 64), "read")), "64 hex digits"},
		{"no roles", `{"tokens": [{"name": "ci", "sha256": "` + hash + `", "roles": []}]}`, "at least one role"},
		{"no name", tokenFile(tokenEntry("", hash, "read")), "a name is required"},
		{"an unknown field", `{"tokens": [], "extra": 1}`, "unknown field"},
		{"not JSON", `tokens: []`, "not a token file"},
	}
	for _, tt := range tests {
		_, err := Parse(strings.NewReader(tt.file))
		if err == nil || !strings.Contains(err.Error(), tt.wantInError) || strings.Contains(err.Error(), hash) {
			t.Errorf("%s: %v, want an error mentioning %q and not the hash", tt.name, err, tt.wantInError)
		}
	}
}

// TestFileFollowsChangesAndKeepsTheLastGoodVersion: a removed token stops
// working once the file changes; a version that does not parse is refused
// and the previous one stays in force.
func TestFileFollowsChangesAndKeepsTheLastGoodVersion(t *testing.T) {
	old := checkEvery
	checkEvery = 0
	t.Cleanup(func() { checkEvery = old })
	path := filepath.Join(t.TempDir(), "tokens.json")
	oldToken, oldHash := NewToken()
	newToken, newHash := NewToken()
	write := func(content string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Second)
		_ = os.Chtimes(path, later, later)
	}
	write(tokenFile(tokenEntry("old", oldHash, "decide")))
	var refused []error
	f, err := OpenFile(path, func(err error) { refused = append(refused, err) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Authorize(oldToken, RoleDecide); err != nil {
		t.Fatal(err)
	}
	write(tokenFile(tokenEntry("old", oldHash, "decide"), tokenEntry("new", newHash, "decide")))
	if _, err := f.Authorize(newToken, RoleDecide); err != nil {
		t.Fatalf("the added token: %v", err)
	}
	write(`{"tokens": [`) // half written
	if _, err := f.Authorize(newToken, RoleDecide); err != nil || len(refused) != 1 {
		t.Fatalf("a broken file replaced the good one: %v (%d refusals)", err, len(refused))
	}
	write(tokenFile(tokenEntry("new", newHash, "decide")))
	if _, err := f.Authorize(oldToken, RoleDecide); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("the removed token still works: %v", err)
	}
	if _, err := OpenFile(filepath.Join(t.TempDir(), "missing.json"), nil); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("a missing file: %v", err)
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]string{
		"Bearer abc": "abc", "bearer abc": "abc", "Basic abc": "", "": "", "Bearer": "", "Bearer  abc ": "abc",
	} {
		if got := BearerToken(header); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", header, got, want)
		}
	}
}
