package httpapi

import (
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/auth"
)

// TestEveryRouteNeedsItsRole drives every operation of api/openapi.yaml,
// which names the role each needs (x-limitnode-role), with tokens on: no
// token is a 401, a token without the role a 403, a token with it (or
// admin) gets the route's own answer; /healthz and /readyz stay open. The
// document is the table, so a route added without its role fails here.
func TestEveryRouteNeedsItsRole(t *testing.T) {
	t.Parallel()
	tokens, authorizer := mustTokens(t)
	h := New(newFake(), Options{Logger: slog.New(slog.DiscardHandler), Authorizer: authorizer})

	spec := openAPI(t)
	for _, path := range slices.Sorted(maps.Keys(spec.doc.Paths.Map())) {
		for method, op := range spec.doc.Paths.Value(path).Operations() {
			role, _ := op.Extensions["x-limitnode-role"].(string)
			concrete := pathParam.ReplaceAllString(path, "x")
			t.Run(method+" "+path, func(t *testing.T) {
				t.Parallel()
				send := func(token string) *httptest.ResponseRecorder {
					req := newOpenAPIRequest(method, concrete, "{}")
					if token != "" {
						req.Header.Set("Authorization", "Bearer "+token)
					}
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					validateAgainstOpenAPI(t, req, []byte("{}"), rec)
					return rec
				}
				switch role {
				case "open":
					if rec := send(""); rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden {
						t.Fatalf("an open route answered %d without a token", rec.Code)
					}
					return
				case string(auth.RoleDecide), string(auth.RoleRead), string(auth.RoleAdmin):
				default:
					t.Fatalf("the document gives no x-limitnode-role (decide, read, admin or open): %q", role)
				}
				if rec := send(""); rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("no token: %d (WWW-Authenticate %q), want 401 with the header", rec.Code, rec.Header().Get("WWW-Authenticate"))
				} else if !strings.Contains(rec.Body.String(), "Bearer <token>") {
					t.Errorf("no token: the body %s does not say Bearer <token> as written (HTML escaping?)", rec.Body)
				}
				if rec := send("ln_not-a-known-token"); rec.Code != http.StatusUnauthorized {
					t.Errorf("an unknown token: %d, want 401", rec.Code)
				}
				for holder, token := range tokens {
					rec := send(token)
					allowed := holder == auth.RoleAdmin || string(holder) == role
					switch {
					case allowed && (rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden):
						t.Errorf("a %s token: %d %s, want the route's own answer", holder, rec.Code, rec.Body)
					case !allowed && rec.Code != http.StatusForbidden:
						t.Errorf("a %s token: %d, want 403", holder, rec.Code)
					}
				}
			})
		}
	}
}

// mustTokens returns a token of each role and the authorizer that knows
// them, as a token file would give it.
func mustTokens(t testing.TB) (map[auth.Role]string, auth.Authorizer) {
	t.Helper()
	tokens := map[auth.Role]string{}
	var file strings.Builder
	file.WriteString(`{"tokens": [`)
	for i, role := range []auth.Role{auth.RoleDecide, auth.RoleRead, auth.RoleAdmin} {
		token, hash := auth.NewToken()
		tokens[role] = token
		if i > 0 {
			file.WriteString(",")
		}
		file.WriteString(`{"name": "` + string(role) + `-client", "sha256": "` + hash + `", "roles": ["` + string(role) + `"]}`)
	}
	file.WriteString("]}")
	authorizer, err := auth.Parse(strings.NewReader(file.String()))
	if err != nil {
		t.Fatal(err)
	}
	return tokens, authorizer
}
