package fsm

import (
	"bytes"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

// edgeConfig is a domain with one limit of each kind the FSM treats apart:
// plain, named and replaced, unlimited, shadow, deny-all, a token bucket.
const edgeConfig = `
domain: edge
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: route
    value: /login
    rate_limit: {unit: hour, requests_per_unit: 3, name: login, replaces: [{name: global}]}
  - key: route
    rate_limit: {unit: hour, requests_per_unit: 100, name: global}
  - key: internal
    rate_limit: {unlimited: true}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: banned
    rate_limit: {unit: day, requests_per_unit: 0}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 4}
  - key: tenant
    descriptors:
      - key: path
        rate_limit: {unit: second, requests_per_unit: 10}
`

func (a *applier) putRLS(yaml string) any {
	a.t.Helper()
	c, err := rls.Parse([]byte(yaml))
	if err != nil {
		a.t.Fatalf("parse: %v", err)
	}
	data, encErr := Encode(CommandPutRLSConfig, &c)
	if encErr != nil {
		a.t.Fatal(encErr)
	}
	return a.raw(data)
}

// descriptor is a query descriptor of key=value entries, in order.
func descriptor(hits int64, kv ...string) rls.QueryDescriptor {
	d := rls.QueryDescriptor{Hits: hits}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, rls.Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func query(ds ...rls.QueryDescriptor) Request {
	return Request{RLS: &rls.Query{Domain: "edge", Descriptors: ds}}
}

// outcome is what a test expects of one descriptor: "-" not limited,
// "unlimited", "ok", "over", "shadow-over".
func outcomeOf(r Result, i int) string {
	s := r.RLS[i]
	switch {
	case s.Unlimited:
		return "unlimited"
	case !s.Limited:
		return "-"
	case !r.Checks[s.Check].Decision.Allowed && s.Shadow:
		return "shadow-over"
	case !r.Checks[s.Check].Decision.Allowed:
		return "over"
	default:
		return "ok"
	}
}

func TestRLSQueriesAreDecidedAllOrNothing(t *testing.T) {
	t.Parallel()
	type step struct {
		query   Request
		allowed bool
		want    []string // per descriptor
	}
	client := func(v string) rls.QueryDescriptor { return descriptor(1, "client", v) }
	tests := []struct {
		name  string
		steps []step
	}{
		{"each value of a key-only descriptor counts apart", []step{
			{query(client("a")), true, []string{"ok"}},
			{query(client("a")), true, []string{"ok"}},
			{query(client("a")), false, []string{"over"}},
			{query(client("b")), true, []string{"ok"}},
		}},
		{"one denial consumes nothing of the others", []step{
			{query(client("a"), descriptor(2, "bucket", "x")), true, []string{"ok", "ok"}},
			{query(client("a"), descriptor(3, "bucket", "x")), false, []string{"ok", "over"}},
			// The bucket kept 2 of 4, the client 1 of 2: both still fit.
			{query(client("a"), descriptor(2, "bucket", "x")), true, []string{"ok", "ok"}},
		}},
		{"a replaced limit does not apply", []step{
			{query(descriptor(3, "route", "/login"), descriptor(1, "route", "/login")), false, []string{"over", "over"}},
			{query(descriptor(1, "route", "/home")), true, []string{"ok"}},
		}},
		{"the replacing limit applies to its own descriptor only", []step{
			{query(descriptor(3, "route", "/login")), true, []string{"ok"}},
			{query(descriptor(1, "route", "/login")), false, []string{"over"}},
			{query(descriptor(1, "route", "/login"), descriptor(50, "route", "/home")), false, []string{"over", "-"}},
		}},
		{"unlimited, unmatched and unknown entries are not limited", []step{
			{query(descriptor(1000, "internal", "x"), descriptor(1, "nothing", "y")), true, []string{"unlimited", "-"}},
		}},
		{"a shadow limit reports but never denies", []step{
			{query(descriptor(1, "trial", "t")), true, []string{"ok"}},
			{query(descriptor(1, "trial", "t")), true, []string{"shadow-over"}},
			{query(descriptor(1, "trial", "t"), client("a")), true, []string{"shadow-over", "ok"}},
		}},
		{"requests_per_unit 0 refuses every hit, and a check too", []step{
			{query(descriptor(1, "banned", "b")), false, []string{"over"}},
			{query(descriptor(0, "banned", "b")), false, []string{"over"}},
		}},
		{"hits beyond the capacity are over the limit", []step{
			{query(descriptor(5, "bucket", "y")), false, []string{"over"}},
			{query(descriptor(4, "bucket", "y")), true, []string{"ok"}},
		}},
		{"hits 0 checks without consuming", []step{
			{query(descriptor(0, "client", "c"), descriptor(0, "client", "c")), true, []string{"ok", "ok"}},
			{query(client("c")), true, []string{"ok"}},
			{query(client("c")), true, []string{"ok"}},
		}},
		{"two descriptors on one counter add their hits", []step{
			{query(client("d"), client("d")), true, []string{"ok", "ok"}},
			{query(client("d")), false, []string{"over"}},
		}},
		{"an override replaces the configuration's limit", []step{
			{query(rls.QueryDescriptor{Entries: []rls.Entry{{Key: "client", Value: "e"}}, Hits: 5,
				Override: &rls.Override{RequestsPerUnit: 5, Unit: "HOUR"}}), true, []string{"ok"}},
			{query(rls.QueryDescriptor{Entries: []rls.Entry{{Key: "anything", Value: "e"}}, Hits: 1,
				Override: &rls.Override{RequestsPerUnit: 1, Unit: "HOUR"}}), true, []string{"ok"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := newApplier(t)
			if r := a.putRLS(edgeConfig); r != nil {
				t.Fatalf("put: %v", r)
			}
			for i, st := range tt.steps {
				r := a.allow(t0, st.query)[0]
				if r.Rejection != nil {
					t.Fatalf("step %d: rejected: %v", i, r.Rejection)
				}
				var got []string
				for j := range r.RLS {
					got = append(got, outcomeOf(r, j))
				}
				if r.Allowed != st.allowed || !slices.Equal(got, st.want) {
					t.Fatalf("step %d: allowed %v %v, want %v %v", i, r.Allowed, got, st.allowed, st.want)
				}
			}
		})
	}
}

func TestRLSConfigChangesAtOneIndex(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.putRLS(edgeConfig)
	q := query(descriptor(1, "client", "a"))
	a.allow(t0, q)
	a.allow(t0, q)
	if r := a.allow(t0, q)[0]; r.Allowed {
		t.Fatal("the third hit of 2 per minute was allowed")
	}
	// Raising the limit keeps the 2 used against the new one.
	a.putRLS("domain: edge\ndescriptors:\n  - key: client\n    rate_limit: {unit: minute, requests_per_unit: 3}\n")
	if r := a.allow(t0, q)[0]; !r.Allowed || r.Checks[0].Decision.Remaining != 0 {
		t.Fatalf("after raising to 3: %+v, want allowed with 0 left", r)
	}
	if r := a.allow(t0, q)[0]; r.Allowed {
		t.Fatal("a fourth hit of 3 per minute was allowed")
	}
	data, err := Encode(CommandDeleteRLSConfig, &NamedDeleteCommand{Name: "edge"})
	if err != nil {
		t.Fatal(err)
	}
	if r := a.raw(data); r != nil {
		t.Fatalf("delete: %v", r)
	}
	if r := a.allow(t0, q)[0]; !r.Allowed || r.RLS[0].Limited {
		t.Fatalf("a deleted domain still limits: %+v", r)
	}
	if r, ok := a.raw(data).(*contract.Error); !ok || r.Code != contract.CodeNotFound {
		t.Fatalf("deleting it again: %v, want not found", r)
	}
}

func TestRLSRejections(t *testing.T) {
	t.Parallel()
	long := make([]byte, rls.MaxValueBytes)
	for i := range long {
		long[i] = 'v'
	}
	tests := []struct {
		name  string
		req   Request
		field string
	}{
		{"no descriptors", query(), "descriptors"},
		{"an empty domain", Request{RLS: &rls.Query{Descriptors: []rls.QueryDescriptor{descriptor(1, "client", "a")}}}, "domain"},
		{"negative hits", query(descriptor(-1, "client", "a")), "descriptors[0].hits_addend"},
		{"a bad override unit", query(rls.QueryDescriptor{Entries: []rls.Entry{{Key: "client", Value: "a"}}, Hits: 1,
			Override: &rls.Override{RequestsPerUnit: 1, Unit: "FORTNIGHT"}}), "descriptors[0].limit.unit"},
		{"checks besides a query", Request{RLS: &rls.Query{Domain: "edge"}, Checks: []Check{inlineCheck("k", hourly(1), 1)}}, "checks"},
		{"a counter key over the bound", query(descriptor(1, "tenant", string(long), "path", string(long))), "descriptors[0].entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := newApplier(t)
			a.putRLS(edgeConfig)
			a.allow(t0, query(descriptor(1, "client", "warm-up"))) // sets the cluster's time
			before := mustSnapshot(t, a.fsm)
			r := a.allow(t0, tt.req)[0]
			if r.Rejection == nil || r.Rejection.Field != tt.field {
				t.Fatalf("rejection %v, want one naming %q", r.Rejection, tt.field)
			}
			if after := mustSnapshot(t, a.fsm); !bytes.Equal(before, after) {
				t.Fatal("a refused query changed the state")
			}
		})
	}
}

func TestRLSDomainsSurviveSnapshots(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.putRLS(edgeConfig)
	a.putRLS("domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	a.allow(t0, query(descriptor(1, "client", "a")))
	snap, err := a.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	stored, restored := persisted(t, snap)
	if !bytes.Equal(restored, mustSnapshot(t, a.fsm)) {
		t.Fatal("the restored state differs from the snapshot's")
	}
	b := newApplier(t)
	if err := b.fsm.Restore(io.NopCloser(bytes.NewReader(stored))); err != nil {
		t.Fatal(err)
	}
	if got := b.fsm.RLSDomains(); !slices.Equal(got, []string{"edge", "other"}) {
		t.Fatalf("restored domains %v", got)
	}
	b.index = a.index
	q := query(descriptor(1, "client", "a"))
	for _, f := range []*applier{a, b} {
		if r := f.allow(t0+int64(time.Millisecond), q)[0]; !r.Allowed {
			t.Fatal("the second of 2 hits was denied")
		}
		if r := f.allow(t0+int64(time.Millisecond), q)[0]; r.Allowed {
			t.Fatal("the third of 2 hits was allowed: the counter was lost")
		}
	}
}
