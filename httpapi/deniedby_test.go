package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/testcluster"
)

// TestADenialNamesThePolicyVersionThatDeniedIt: on a 3-node cluster, a
// denial through a follower (asked of the leader, then answered from a deny
// lease) names the check, the policy, the version GET /v1/policies shows
// and the limit, in the body and in Limitnode-Denied-By; a changed policy
// is named with its new version.
func TestADenialNamesThePolicyVersionThatDeniedIt(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitLeader()
	follower := c.Followers()[0]
	hc := testcluster.HTTPClient()
	cl := client.NewWithOptions(client.Options{HTTPClient: hc}, follower.URL())
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
	defer cancel()
	put := func(rate int64) uint64 {
		t.Helper()
		if _, err := cl.PutPolicy(ctx, "per-tenant", client.Policy{Limit: &client.Limit{Rate: rate, Period: time.Hour}, KeyTemplate: "{tenant}"}); err != nil {
			t.Fatal(err)
		}
		p, err := cl.GetPolicy(ctx, "per-tenant")
		if err != nil || p.Version == 0 {
			t.Fatalf("get: %+v %v", p, err)
		}
		return p.Version
	}
	version := put(1)
	req := client.AllowRequest{Checks: []client.Check{
		{Key: "global", Limit: &client.Limit{Rate: 1000, Period: time.Second}},
		{Policy: "per-tenant", Dimensions: map[string]string{"tenant": "t1"}},
	}}
	if d, err := cl.Allow(ctx, req); err != nil || !d.Allowed || d.DeniedBy != nil {
		t.Fatalf("the first: %+v %v", d, err)
	}
	for i := range 3 {
		d, err := cl.Allow(ctx, req)
		if err != nil || d.Allowed || d.DeniedBy == nil {
			t.Fatalf("denial %d: %+v %v", i, d, err)
		}
		by := d.DeniedBy
		if by.Check != 1 || by.Policy != "per-tenant" || by.PolicyVersion != version || by.Cause != "limit" || by.Limit.Rate != 1 || by.Limit.Period != time.Hour {
			t.Fatalf("denial %d is explained as %+v, want check 1 of per-tenant at version %d", i, *by, version)
		}
	}
	header := func() string {
		t.Helper()
		body := `{"checks":[{"key":"global","limit":{"rate":1000}},{"policy":"per-tenant","dimensions":{"tenant":"t1"}}]}`
		resp, err := hc.Post(follower.URL()+"/v1/allow", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return resp.Header.Get("Limitnode-Denied-By")
	}
	if got, want := header(), `"per-tenant";check=1;version=`; !strings.HasPrefix(got, want) || !strings.Contains(got, ";cause=limit;algorithm=token_bucket;rate=1;period_ms=3600000;burst=1") {
		t.Fatalf("Limitnode-Denied-By %q", got)
	}
	// Half the limit: the bucket is still spent, and the denial names the
	// new version.
	newer := put(2)
	if newer <= version {
		t.Fatalf("the policy put again has version %d, want later than %d", newer, version)
	}
	d, err := cl.Allow(ctx, client.AllowRequest{Policy: "per-tenant", Dimensions: map[string]string{"tenant": "t1"}, Cost: 2})
	if err != nil || d.Allowed || d.DeniedBy == nil || d.DeniedBy.PolicyVersion != newer {
		t.Fatalf("after the change: %+v %v, want denied by version %d", d, err, newer)
	}
}
