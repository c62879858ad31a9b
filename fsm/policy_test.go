package fsm

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"

	"github.com/limitnode/limitnode/algorithms"
)

func (a *applier) put(p contract.Policy) any {
	a.t.Helper()
	data, err := Encode(CommandPutPolicy, &p)
	if err != nil {
		a.t.Fatal(err)
	}
	return a.raw(data)
}

func (a *applier) deletePolicy(name string) any {
	a.t.Helper()
	data, err := Encode(CommandDeletePolicy, &NamedDeleteCommand{Name: name})
	if err != nil {
		a.t.Fatal(err)
	}
	return a.raw(data)
}

func policyReq(key, policy string, cost int64, dims ...contract.Dimension) Request {
	return Request{Checks: []Check{policyCheck(key, policy, dims, cost)}}
}

var hourly = func(rate int64) algorithms.Limit {
	return algorithms.Limit{Rate: rate, Period: time.Hour, Burst: rate}
}

func TestPolicyDecidesAndChangesAtOneIndex(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	if r := a.put(contract.Policy{Name: "api", Limit: hourly(10)}); r != nil {
		t.Fatalf("put: %v", r)
	}
	for range 4 {
		if r := a.allow(t0, policyReq("tenant-1", "api", 1))[0]; !r.Allowed {
			t.Fatalf("denied: %+v", r)
		}
	}
	r := a.allow(t0, policyReq("tenant-1", "api", 0))[0]
	if got := r.Checks[0]; got.Decision.Remaining != 6 || got.Decision.Limit != 10 || got.PeriodNanos != int64(time.Hour) {
		t.Fatalf("check %+v, want remaining 6 of 10 per hour", got)
	}
	// Raising the limit keeps the 4 used: 100 - 4 = 96 left.
	a.put(contract.Policy{Name: "api", Limit: hourly(100)})
	if r := a.allow(t0, policyReq("tenant-1", "api", 0))[0]; r.Checks[0].Decision.Remaining != 96 {
		t.Fatalf("after raising the limit: %d left, want 96", r.Checks[0].Decision.Remaining)
	}
	// Lowering it below the usage leaves nothing.
	a.put(contract.Policy{Name: "api", Limit: hourly(3)})
	if r := a.allow(t0, policyReq("tenant-1", "api", 1))[0]; r.Allowed || r.Checks[0].Decision.Remaining != 0 {
		t.Fatalf("after lowering the limit: %+v", r)
	}
}

func TestPolicyOverridesAKey(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.put(contract.Policy{Name: "api", Limit: hourly(2), Overrides: []contract.Override{{Key: "vip", Limit: hourly(50)}}})
	if r := a.allow(t0, policyReq("vip", "api", 10))[0]; !r.Allowed || r.Checks[0].Decision.Remaining != 40 {
		t.Fatalf("vip: %+v", r)
	}
	if r := a.allow(t0, policyReq("regular", "api", 3))[0]; r.Rejection == nil || r.Rejection.Field != "checks[0].cost" {
		t.Fatalf("a cost over the default limit: %+v", r)
	}
}

func TestShadowPolicyCountsButNeverDenies(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.put(contract.Policy{Name: "trial", Limit: hourly(2), Shadow: true})
	strict := algorithms.Limit{Rate: 4, Period: time.Hour, Burst: 4}
	both := Request{Checks: []Check{policyCheck("k", "trial", nil, 1), inlineCheck("k", strict, 1)}}
	for i := range 5 {
		r := a.allow(t0, both)[0]
		wantAllowed := i < 4 // only the inline limit of 4 denies
		if r.Allowed != wantAllowed || !r.Checks[0].Shadow {
			t.Fatalf("request %d: allowed=%v shadow=%v, want allowed=%v", i, r.Allowed, r.Checks[0].Shadow, wantAllowed)
		}
		if i >= 2 && r.Checks[0].Decision.Allowed {
			t.Fatalf("request %d: the shadow check reports allowed past its limit", i)
		}
	}
	// Requests 3 and 4 would have been denied by the shadow policy; the 5th
	// was denied by the real limit and counted by the shadow one too.
	if p, _ := a.fsm.Policy("trial"); p.ShadowDenied != 3 {
		t.Fatalf("shadow denied %d, want 3", p.ShadowDenied)
	}
}

func TestKeyTemplates(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.put(contract.Policy{Name: "per-route", Limit: hourly(5), KeyTemplate: "{api_key}:{route}"})
	dims := []contract.Dimension{{Name: "api_key", Value: "abc"}, {Name: "route", Value: "/export"}}
	r := a.allow(t0, policyReq("", "per-route", 1, dims...))[0]
	if !r.Allowed || r.Checks[0].Key != "abc:/export" {
		t.Fatalf("rendered: %+v", r)
	}
	tests := []struct {
		name string
		dims []contract.Dimension
		want string
	}{
		{"a missing dimension is named", []contract.Dimension{{Name: "api_key", Value: "abc"}}, "missing dimensions for the key template \"{api_key}:{route}\": route"},
		{"an unknown dimension is named", []contract.Dimension{{Name: "api_key", Value: "abc"}, {Name: "region", Value: "eu"}, {Name: "route", Value: "/"}}, "dimensions not in the key template \"{api_key}:{route}\": region"},
	}
	for _, tt := range tests {
		r := a.allow(t0, policyReq("", "per-route", 1, tt.dims...))[0]
		if r.Rejection == nil || r.Rejection.Field != "checks[0].dimensions" || r.Rejection.Message != tt.want {
			t.Errorf("%s: %+v", tt.name, r.Rejection)
		}
	}
}

func TestPolicyRejections(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	if r := a.allow(t0, policyReq("k", "nope", 1))[0]; r.Rejection == nil || r.Rejection.Code != contract.CodeNotFound {
		t.Fatalf("unknown policy: %+v", r)
	}
	bad := []struct {
		name   string
		policy contract.Policy
		field  string
	}{
		{"a bad name", contract.Policy{Name: "has space", Limit: hourly(1)}, "name"},
		{"a bad limit", contract.Policy{Name: "p", Limit: algorithms.Limit{Rate: 0, Period: 1e9, Burst: 1}}, "limit.rate"},
		{"unsorted overrides", contract.Policy{Name: "p", Limit: hourly(1), Overrides: []contract.Override{{Key: "b", Limit: hourly(1)}, {Key: "a", Limit: hourly(1)}}}, "overrides"},
		{"a template without placeholders", contract.Policy{Name: "p", Limit: hourly(1), KeyTemplate: "fixed"}, "key_template"},
		{"an unbalanced template", contract.Policy{Name: "p", Limit: hourly(1), KeyTemplate: "{a"}, "key_template"},
		{"a repeated placeholder", contract.Policy{Name: "p", Limit: hourly(1), KeyTemplate: "{a}{a}"}, "key_template"},
	}
	for _, tt := range bad {
		r, ok := a.put(tt.policy).(*contract.Error)
		if !ok || r.Field != tt.field {
			t.Errorf("%s: put answered %#v, want a rejection on %q", tt.name, r, tt.field)
		}
	}
	if page, _ := a.fsm.PoliciesPage("", contract.MaxPolicies, contract.MaxTotalOverrides); len(page) != 0 {
		t.Fatal("a rejected policy was stored")
	}
	a.put(contract.Policy{Name: "p", Limit: hourly(1)})
	if r := a.deletePolicy("p"); r != nil {
		t.Fatalf("delete: %v", r)
	}
	if r, ok := a.deletePolicy("p").(*contract.Error); !ok || r.Code != contract.CodeNotFound {
		t.Fatalf("deleting a deleted policy: %v", r)
	}
}

func TestPoliciesSurviveSnapshots(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.put(contract.Policy{Name: "b", Limit: hourly(10), Overrides: []contract.Override{{Key: "vip", Limit: hourly(20)}}, Shadow: true, KeyTemplate: "{user}"})
	a.put(contract.Policy{Name: "a", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 3, Period: time.Minute}})
	for range 5 {
		a.allow(t0, policyReq("", "b", 3, contract.Dimension{Name: "user", Value: "u1"}))
		a.allow(t0, policyReq("x", "a", 1))
	}
	snap := mustSnapshot(t, a.fsm)
	b := newApplier(t)
	if err := b.fsm.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, mustSnapshot(t, b.fsm)) {
		t.Fatal("the restored state snapshots differently")
	}
	got, _ := b.fsm.PoliciesPage("", contract.MaxPolicies, contract.MaxTotalOverrides)
	if len(got) != 2 || got[0].Name != "a" || got[1].ShadowDenied != 2 || got[1].KeyTemplate != "{user}" {
		t.Fatalf("restored policies %+v", got)
	}
	if r := b.allow(t0, policyReq("x", "a", 1))[0]; r.Allowed {
		t.Fatal("the restored window forgot its count")
	}
	if !strings.Contains(string(snap), "vip") {
		t.Fatal("overrides are not in the snapshot")
	}
}

// TestPolicyStateIsBounded: the overrides of all policies together are
// capped (a policy of 10,000 overrides cost ~15 MB a node, and 10,000 such
// were allowed); a put over the cap is refused whole, and replacing or
// deleting a policy gives its overrides back.
func TestPolicyStateIsBounded(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	full := func(name string) contract.Policy {
		p := contract.Policy{Name: name, Limit: hourly(1)}
		for i := range contract.MaxOverrides {
			p.Overrides = append(p.Overrides, contract.Override{Key: fmt.Sprintf("k%05d", i), Limit: hourly(2)})
		}
		return p
	}
	for i := range contract.MaxTotalOverrides / contract.MaxOverrides {
		if r := a.put(full(fmt.Sprint("p", i))); r != nil {
			t.Fatalf("policy %d: %v", i, r)
		}
	}
	if r, ok := a.put(full("one-too-many")).(*contract.Error); !ok || r.Field != "overrides" {
		t.Fatalf("a policy over the total: %v", r)
	}
	if r := a.put(full("p0")); r != nil {
		t.Fatalf("replacing a policy with as many overrides: %v", r)
	}
	if r := a.deletePolicy("p1"); r != nil {
		t.Fatal(r)
	}
	if r := a.put(full("one-too-many")); r != nil {
		t.Fatalf("after a delete: %v", r)
	}
}
