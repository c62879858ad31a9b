package cluster_test

import (
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/limitnode/limitnode/testcluster"
)

// TestAuditSinceTheLastIndexListsNothing reads GET /v1/audit after three
// recorded changes with since at every edge: 0 lists all three, the last
// entry's index and every index after it (up to 2^64-1, which since+1 would
// wrap to 0) list none, and a since that is not an index is a 400 naming
// since.
func TestAuditSinceTheLastIndexListsNothing(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	url := c.WaitLeader().URL()
	for i := range 3 {
		body := fmt.Sprintf(`{"limit":{"rate":%d,"period":"1h"}}`, i+1)
		if status, answer := do(t, "PUT", url+"/v1/policies/audited-"+strconv.Itoa(i), body); status != 200 {
			t.Fatalf("PUT policy %d: %d %v", i, status, answer)
		}
	}
	entries := func(since string) []any {
		t.Helper()
		status, answer := do(t, "GET", url+"/v1/audit?since="+since, "")
		if status != 200 {
			t.Fatalf("since=%s: %d %v", since, status, answer)
		}
		list, _ := answer["entries"].([]any)
		return list
	}
	all := entries("0")
	if len(all) != 3 {
		t.Fatalf("since=0 lists %d entries, want the 3 changes: %v", len(all), all)
	}
	last := uint64(all[2].(map[string]any)["index"].(float64))
	for _, since := range []uint64{last, last + 1, math.MaxUint64 - 1, math.MaxUint64} {
		if got := entries(strconv.FormatUint(since, 10)); len(got) != 0 {
			t.Errorf("since=%d lists %d entries, want none after the last (index %d): %v", since, len(got), last, got)
		}
	}
	for _, since := range []string{"-1", "18446744073709551616", "x"} {
		if status, answer := do(t, "GET", url+"/v1/audit?since="+since, ""); status != 400 || answer["field"] != "since" {
			t.Errorf("since=%s: %d %v, want a 400 naming since", since, status, answer)
		}
	}
}
