package fsm

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

// sharedConfig has descriptors with local_shares and without, and in shadow
// mode, beside one nested under a limit that has them.
const sharedConfig = `
domain: hot
descriptors:
  - key: api_key
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket, local_shares: {max_units: 10}}
    descriptors:
      - key: path
        rate_limit: {unit: second, requests_per_unit: 100}
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 100, local_shares: {}}
`

// rlsQuery is a query of one descriptor per entries list, each of hits.
func rlsQuery(domain string, hits int64, descriptors ...[]rls.Entry) *rls.Query {
	q := &rls.Query{Domain: domain}
	for _, e := range descriptors {
		q.Descriptors = append(q.Descriptors, rls.QueryDescriptor{Entries: e, Hits: hits})
	}
	return q
}

func entries(kv ...string) []rls.Entry {
	var out []rls.Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, rls.Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

// TestRLSSharesOnlyWithTheDomainsConsent: a share of an RLS descriptor is
// granted only for a query of that one descriptor whose rate_limit has
// local_shares in the domain as the entry finds it, at most its max_units;
// a descriptor without them, a shadow one, a nested limit, a query of two
// descriptors or with an override, or an unknown domain, gets none (the
// last two are refused as asked wrong), and nothing is charged for it.
func TestRLSSharesOnlyWithTheDomainsConsent(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	if resp := a.putRLS(sharedConfig); resp != nil {
		t.Fatal(resp)
	}
	t0 := int64(1e18)
	overridden := rlsQuery("hot", 1, entries("api_key", "o"))
	overridden.Descriptors[0].Override = &rls.Override{RequestsPerUnit: 1000, Unit: "SECOND"}
	tests := []struct {
		name      string
		q         *rls.Query
		want      int64 // units granted
		remaining int64 // what the counter has left after
		refused   string
	}{
		{"a descriptor with local_shares: its max_units", rlsQuery("hot", 1, entries("api_key", "a")), 10, 89, ""},
		{"a descriptor without local_shares", rlsQuery("hot", 1, entries("plain", "a")), 0, 99, ""},
		{"a shadow descriptor", rlsQuery("hot", 1, entries("trial", "a")), 0, 99, ""},
		{"a nested limit without them", rlsQuery("hot", 1, entries("api_key", "b", "path", "/")), 0, 99, ""},
		{"a domain that does not exist", rlsQuery("cold", 1, entries("api_key", "a")), 0, 0, ""},
		{"two descriptors", rlsQuery("hot", 1, entries("api_key", "c"), entries("plain", "c")), 0, 0, "descriptors"},
		{"an override", overridden, 0, 0, "descriptors"},
	}
	for _, tt := range tests {
		r := a.allow(t0, askFor(Request{RLS: tt.q}, 80, time.Second))[0]
		if tt.refused != "" {
			if r.Rejection == nil || r.Rejection.Field != tt.refused {
				t.Errorf("%s: %+v, want a refusal naming %q", tt.name, r.Rejection, tt.refused)
			}
			continue
		}
		if !r.Allowed || r.Rejection != nil {
			t.Fatalf("%s: %+v", tt.name, r)
		}
		var got int64
		if r.Share != nil {
			got = r.Share.Units
			if r.Share.Remaining != tt.remaining || r.Share.UntilNanos != t0+int64(contract.DefaultShareTTL) {
				t.Errorf("%s: share %+v, want %d remaining until %d", tt.name, r.Share, tt.remaining, t0+int64(contract.DefaultShareTTL))
			}
		}
		if got != tt.want {
			t.Errorf("%s: granted %d, want %d", tt.name, got, tt.want)
		}
		if len(r.Checks) > 0 && r.Checks[0].Decision.Remaining-got != tt.remaining {
			t.Errorf("%s: %d left after the request and the share, want %d", tt.name, r.Checks[0].Decision.Remaining-got, tt.remaining)
		}
	}
	if got := a.fsm.OutstandingShares(); len(got) != 1 || got[0] != (contract.ShareCount{Policy: RLSOwner("hot"), Shares: 1, Units: 10}) {
		t.Errorf("outstanding %+v, want one share of 10 of rls/hot", got)
	}
}

// TestRLSSharesGivenBackAndAcrossAConfigChange: the holder gives back what
// it did not spend of an RLS descriptor's share (a return proved with
// another secret is refused); a domain change that
// lowers the limit leaves the counter under the limit its shares were
// granted under until they end, grants none meanwhile, and one without
// local_shares grants none after.
func TestRLSSharesGivenBackAndAcrossAConfigChange(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.putRLS(sharedConfig)
	t0 := int64(1e18)
	q := rlsQuery("hot", 1, entries("api_key", "a"))
	sh := a.allow(t0, askFor(Request{RLS: q}, 10, time.Second))[0].Share
	if sh == nil || sh.Units != 10 {
		t.Fatalf("share %+v, want 10 units", sh)
	}
	named := rlsQuery("hot", 0, entries("api_key", "a"))
	data, err := Encode(CommandReturnShare, &ReturnShareCommand{NowNanos: t0 + 1, ShareID: sh.ID, Unspent: 10, Holder: testHolder, Proof: ShareProof([]byte("a stranger's guess")), RLS: named})
	if err != nil {
		t.Fatal(err)
	}
	if refused, ok := a.raw(data).(*contract.Error); !ok || refused.Code != contract.CodePermissionDenied {
		t.Fatalf("a return proved with another secret answered %+v, want a refusal", refused)
	}
	ret, ok := a.returnRLSShare(t0+1, named, sh.ID, 4).(*ShareReturn)
	if !ok || ret.Units != 4 {
		t.Fatalf("the return answered %+v, want 4 units back", ret)
	}
	sh = a.allow(t0+2, askFor(Request{RLS: q}, 10, time.Second))[0].Share
	if sh == nil {
		t.Fatal("no second share")
	}
	a.putRLS(`
domain: hot
descriptors:
  - key: api_key
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket}
`)
	r := a.allow(t0+3, askFor(Request{RLS: q}, 5, time.Second))[0]
	if r.Checks[0].Decision.Limit != 100 || r.Share != nil {
		t.Errorf("while the share is out: limit %d, share %+v; want the old limit and no share", r.Checks[0].Decision.Limit, r.Share)
	}
	r = a.allow(sh.UntilNanos, askFor(Request{RLS: q}, 5, time.Second))[0]
	if r.Checks[0].Decision.Limit != 10 || r.Share != nil {
		t.Errorf("once the share ended: limit %d, share %+v; want 10 and no share (no local_shares now)", r.Checks[0].Decision.Limit, r.Share)
	}
}

// returnRLSShare is a return of share id of q's descriptor by the test's
// holder, as applied.
func (a *applier) returnRLSShare(now int64, q *rls.Query, id uint64, unspent int64) any {
	a.t.Helper()
	data, err := Encode(CommandReturnShare, &ReturnShareCommand{NowNanos: now, ShareID: id, Unspent: unspent, Holder: testHolder, Proof: ShareProof(testSecret), RLS: q})
	if err != nil {
		a.t.Fatal(err)
	}
	return a.raw(data)
}

// TestRLSSharesPublishedForTheNode: RLSSharesOf tells the node which
// queries it may ask a share for, as the domain was last applied.
func TestRLSSharesPublishedForTheNode(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.putRLS(sharedConfig)
	overridden := rlsQuery("hot", 1, entries("api_key", "o"))
	overridden.Descriptors[0].Override = &rls.Override{RequestsPerUnit: 1000, Unit: "SECOND"}
	tests := []struct {
		name string
		q    *rls.Query
		want int64 // max units; 0: none
	}{
		{"with local_shares", rlsQuery("hot", 1, entries("api_key", "a")), 10},
		{"without", rlsQuery("hot", 1, entries("plain", "a")), 0},
		{"in shadow mode", rlsQuery("hot", 1, entries("trial", "a")), 0},
		{"two descriptors", rlsQuery("hot", 1, entries("api_key", "a"), entries("api_key", "b")), 0},
		{"an override", overridden, 0},
		{"another domain", rlsQuery("cold", 1, entries("api_key", "a")), 0},
	}
	for _, tt := range tests {
		ls, l := a.fsm.RLSSharesOf(tt.q)
		var got int64
		if ls != nil {
			got = ls.MaxUnitsOf(l)
		}
		if got != tt.want {
			t.Errorf("%s: max units %d, want %d", tt.name, got, tt.want)
		}
	}
	a.putRLS("domain: hot\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: second, requests_per_unit: 100}\n")
	if ls, _ := a.fsm.RLSSharesOf(rlsQuery("hot", 1, entries("api_key", "a"))); ls != nil {
		t.Errorf("after a change without local_shares: %+v", ls)
	}
}

// TestRLSSharesSurviveASnapshot: a restored state holds an RLS
// descriptor's share under its domain, gives it back to its holder, and
// publishes the domain for the node's hot path.
func TestRLSSharesSurviveASnapshot(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.putRLS(sharedConfig)
	t0 := int64(1e18)
	sh := a.allow(t0, askFor(Request{RLS: rlsQuery("hot", 1, entries("api_key", "a"))}, 10, time.Second))[0].Share
	if sh == nil {
		t.Fatal("no share")
	}
	restored := newApplier(t)
	if err := restored.fsm.Restore(io.NopCloser(bytes.NewReader(mustSnapshot(t, a.fsm)))); err != nil {
		t.Fatal(err)
	}
	if got := restored.fsm.OutstandingShares(); len(got) != 1 || got[0] != (contract.ShareCount{Policy: RLSOwner("hot"), Shares: 1, Units: 10}) {
		t.Errorf("restored outstanding %+v, want one share of 10 of rls/hot", got)
	}
	if ls, _ := restored.fsm.RLSSharesOf(rlsQuery("hot", 1, entries("api_key", "a"))); ls == nil {
		t.Error("the restored state does not publish the domain's shares")
	}
	if ret, ok := restored.returnRLSShare(t0+1, rlsQuery("hot", 0, entries("api_key", "a")), sh.ID, 10).(*ShareReturn); !ok || ret.Units != 10 {
		t.Errorf("the restored share's return answered %+v, want 10 units back", ret)
	}
}
