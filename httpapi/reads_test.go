package httpapi

import (
	"fmt"
	"testing"

	"github.com/limitnode/limitnode/contract"
)

// TestReadsThatCannotCatchUpAreUnavailable: when the node cannot learn the
// leader's read index, every read of the replicated state answers 503
// unavailable (retry), never the node's own state, which may miss an
// acknowledged write.
func TestReadsThatCannotCatchUpAreUnavailable(t *testing.T) {
	t.Parallel()
	for _, path := range []string{
		"/v1/policies", "/v1/policies/plan", "/v1/keys", "/v1/keys/k", "/v1/blocks", "/v1/audit",
		"/v1/rls/domains", "/v1/rls/domains/edge",
	} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			f.readErr = fmt.Errorf("%w: the leader could not confirm a read index", contract.ErrNoLeader)
			rec := do(t, newTestAPI(f), "GET", path, "")
			if rec.Code != 503 || decodeBody(t, rec)["code"] != "unavailable" || rec.Header().Get("Retry-After") == "" {
				t.Fatalf("GET %s without a read index: %d %s, want 503 unavailable with Retry-After", path, rec.Code, rec.Body)
			}
		})
	}
}
