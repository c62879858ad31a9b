package cluster_test

import (
	"fmt"
	"testing"

	"github.com/limitnode/limitnode/testcluster"
)

// TestKeysAreShownListedAndReset: a key spent under two limits shows both,
// with what remains, on any node and without consuming; the listing pages
// through keys by prefix; a reset through a follower deletes the key's
// state on every node at once, and the key starts afresh.
func TestKeysAreShownListedAndReset(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	follower := c.Followers()[0]
	spend := `{"checks":[{"key":"tenant:acme","limit":{"rate":5,"period":"1h"},"cost":3},{"key":"tenant:acme","limit":{"algorithm":"fixed_window","rate":10,"period":"1h"},"cost":3}]}`
	if a := decided(t, c.WaitLeader().URL()+"/v1/allow", spend); a.status != 200 {
		t.Fatalf("spend: %d", a.status)
	}
	for i := range 3 {
		if a := decided(t, c.WaitLeader().URL()+"/v1/allow", fmt.Sprintf(`{"key":"tenant:k%d","limit":{"rate":5,"period":"1h"}}`, i)); a.status != 200 {
			t.Fatalf("spend k%d: %d", i, a.status)
		}
	}
	for _, n := range c.Nodes {
		status, body := do(t, "GET", n.URL()+"/v1/keys/tenant:acme", "")
		limits, _ := body["limits"].([]any)
		if status != 200 || len(limits) != 2 {
			t.Fatalf("%s: GET the key: %d %v, want its two limits", n.ID, status, body)
		}
		for _, l := range limits {
			if remaining := l.(map[string]any)["remaining"].(float64); remaining != 2 && remaining != 7 {
				t.Fatalf("%s: a limit of the key shows %v remaining, want 2 (5-3) or 7 (10-3)", n.ID, remaining)
			}
		}
	}
	// Showing consumed nothing: 2 of the bucket's 5 are left.
	if a := decided(t, follower.URL()+"/v1/allow", `{"key":"tenant:acme","limit":{"rate":5,"period":"1h"},"cost":2}`); a.status != 200 {
		t.Fatalf("the key after being shown: %d", a.status)
	}

	var listed []string
	after := ""
	for page := 0; ; page++ {
		status, body := do(t, "GET", follower.URL()+"/v1/keys?prefix=tenant:&limit=2&after="+after, "")
		if status != 200 || page > 3 {
			t.Fatalf("list: %d %v", status, body)
		}
		for _, k := range body["keys"].([]any) {
			listed = append(listed, k.(map[string]any)["key"].(string))
		}
		next, _ := body["next"].(string)
		if next == "" {
			break
		}
		after = next
	}
	if fmt.Sprint(listed) != "[tenant:acme tenant:k0 tenant:k1 tenant:k2]" {
		t.Fatalf("the listing by pages of 2: %v", listed)
	}

	if status, body := do(t, "DELETE", follower.URL()+"/v1/keys/tenant:acme", ""); status != 200 || body["limits"] != float64(2) {
		t.Fatalf("reset: %d %v", status, body)
	}
	for _, n := range c.Nodes {
		if status, body := do(t, "GET", n.URL()+"/v1/keys/tenant:acme", ""); status != 404 {
			t.Fatalf("%s: the reset key: %d %v, want 404", n.ID, status, body)
		}
	}
	if a := decided(t, follower.URL()+"/v1/allow", `{"key":"tenant:acme","limit":{"rate":5,"period":"1h"},"cost":5}`); a.status != 200 {
		t.Fatalf("the reset key's whole burst: %d, want it admitted", a.status)
	}
	if status, _ := do(t, "DELETE", follower.URL()+"/v1/keys/tenant:nobody", ""); status != 404 {
		t.Fatalf("reset of a key without state: %d, want 404", status)
	}
}
