package fsm

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

var hundredBurst = algorithms.Limit{Rate: 100, Period: time.Minute, Burst: 100}

// The holder and secret of the shares these tests ask for.
const testHolder = "alice"

var testSecret = []byte("alice's secret")

func askFor(r Request, units int64, ttl time.Duration) Request {
	r.Share = &ShareAsk{Units: units, TTLNanos: int64(ttl), Holder: testHolder, Proof: ShareProof(testSecret)}
	return r
}

// returnShare gives back unspent units of share id as its holder.
func (a *applier) returnShare(now int64, c Check, id uint64, unspent int64) int64 {
	a.t.Helper()
	r, ok := a.returnShareAs(now, c, id, unspent, testHolder, ShareProof(testSecret)).(*ShareReturn)
	if !ok {
		a.t.Fatalf("a share return answered %T", r)
	}
	return r.Units
}

// returnShareAs is a return of share id by holder with proof, as applied.
func (a *applier) returnShareAs(now int64, c Check, id uint64, unspent int64, holder string, proof []byte) any {
	a.t.Helper()
	data, err := Encode(CommandReturnShare, &ReturnShareCommand{NowNanos: now, Check: c, ShareID: id, Unspent: unspent, Holder: holder, Proof: proof})
	if err != nil {
		a.t.Fatal(err)
	}
	return a.raw(data)
}

func (a *applier) remaining(now int64, c Check) int64 {
	a.t.Helper()
	c.Cost = 0
	r := a.allow(now, Request{Checks: []Check{c}})[0]
	if r.Rejection != nil {
		a.t.Fatal(r.Rejection)
	}
	return r.Checks[0].Decision.Remaining
}

// TestSharesAreGrantedFromWhatIsLeft: an ask is granted at most what was
// asked, the policy's max_units and half of what the key has left after the
// request itself; a policy without local_shares grants none.
func TestSharesAreGrantedFromWhatIsLeft(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	t0 := int64(1e18)
	for _, p := range []contract.Policy{
		{Name: "plain", Limit: hundredBurst},
		{Name: "shared", Limit: hundredBurst, LocalShares: &contract.LocalShares{MaxUnits: 10}},
	} {
		if err := a.put(p); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		req       Request
		want      int64 // units granted
		remaining int64 // what the key has left after
		lasts     time.Duration
	}{
		{"inline: half of what is left", askFor(one("k", hundredBurst, 1), 80, time.Second), 50, 49, time.Second},
		{"inline again: half of the rest", askFor(one("k", hundredBurst, 1), 80, time.Second), 24, 24, time.Second},
		{"inline: no more than asked", askFor(one("k", hundredBurst, 0), 3, time.Second), 3, 21, time.Second},
		{"a policy without local_shares", askFor(Request{Checks: []Check{policyCheck("p", "plain", nil, 1)}}, 80, time.Second), 0, 99, 0},
		{"a policy's max_units and TTL", askFor(Request{Checks: []Check{policyCheck("q", "shared", nil, 1)}}, 80, time.Second), 10, 89, contract.DefaultShareTTL},
	}
	for _, tt := range tests {
		r := a.allow(t0, tt.req)[0]
		if !r.Allowed || r.Rejection != nil {
			t.Fatalf("%s: %+v", tt.name, r)
		}
		var got int64
		if r.Share != nil {
			got = r.Share.Units
			if r.Share.UntilNanos != t0+int64(tt.lasts) || r.Share.Remaining != tt.remaining {
				t.Errorf("%s: share %+v, want until %d and %d remaining", tt.name, r.Share, t0+int64(tt.lasts), tt.remaining)
			}
		}
		if got != tt.want {
			t.Errorf("%s: granted %d, want %d", tt.name, got, tt.want)
		}
		if left := a.remaining(t0, tt.req.Checks[0]); left != tt.remaining {
			t.Errorf("%s: %d left, want %d", tt.name, left, tt.remaining)
		}
	}
	if got := a.fsm.OutstandingShares(); len(got) != 2 || got[0] != (contract.ShareCount{Policy: "", Shares: 3, Units: 77}) || got[1] != (contract.ShareCount{Policy: "shared", Shares: 1, Units: 10}) {
		t.Errorf("outstanding %+v", got)
	}
	a.allow(t0+int64(time.Second), one("other", hundredBurst, 1))
	if got := a.fsm.OutstandingShares(); len(got) != 0 {
		t.Errorf("outstanding %+v once every share ended", got)
	}
}

// TestSharesAskedWrongAreRefused: an ask rides on exactly one check, with
// no request ID or max_wait, for a TTL within the bounds.
func TestSharesAskedWrongAreRefused(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	two := Request{Checks: []Check{inlineCheck("a", hundredBurst, 1), inlineCheck("b", hundredBurst, 1)}}
	withID := one("a", hundredBurst, 1)
	withID.RequestID = "r-1"
	tests := []struct {
		name  string
		req   Request
		field string
	}{
		{"two checks", askFor(two, 5, time.Second), "checks"},
		{"a request ID", askFor(withID, 5, time.Second), "request_id"},
		{"no units", askFor(one("a", hundredBurst, 1), 0, time.Second), "share.units"},
		{"a TTL too long", askFor(one("a", hundredBurst, 1), 5, 2*time.Second), "share.ttl"},
	}
	for _, tt := range tests {
		r := a.allow(1e18, tt.req)[0]
		if r.Rejection == nil || r.Rejection.Field != tt.field {
			t.Errorf("%s: %+v, want a refusal naming %q", tt.name, r.Rejection, tt.field)
		}
	}
	if left := a.remaining(1e18, inlineCheck("a", hundredBurst, 0)); left != 100 {
		t.Errorf("refused asks consumed: %d left", left)
	}
}

// TestSharesGivenBackAndReset: what a holder gives back is available
// again, once; a reset key keeps its outstanding shares charged.
func TestSharesGivenBackAndReset(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	t0 := int64(1e18)
	c := inlineCheck("k", hundredBurst, 10)
	sh := a.allow(t0, askFor(Request{Checks: []Check{c}}, 40, time.Second))[0].Share
	if sh == nil || sh.Units != 40 {
		t.Fatalf("share %+v, want 40 units", sh)
	}
	if got := a.returnShare(t0+1, c, sh.ID, 15); got != 15 {
		t.Errorf("gave back %d, want 15", got)
	}
	if got := a.returnShare(t0+2, c, sh.ID, 15); got != 0 {
		t.Errorf("gave back %d a second time, want 0", got)
	}
	if left := a.remaining(t0+3, c); left != 65 {
		t.Errorf("%d left after 15 given back, want 65", left)
	}
	sh = a.allow(t0+4, askFor(Request{Checks: []Check{c}}, 20, time.Second))[0].Share
	reset := func() {
		data, err := Encode(CommandResetKey, &NamedDeleteCommand{Name: "k"})
		if err != nil {
			t.Fatal(err)
		}
		a.raw(data)
	}
	reset()
	if left := a.remaining(t0+5, c); left != 100-sh.Units {
		t.Errorf("%d left after a reset with %d units out, want %d", left, sh.Units, 100-sh.Units)
	}
}

// TestOnlyTheHolderGivesAShareBack: a return that names another holder,
// proves another secret or none, or claims more unspent than the share
// holds is refused and gives nothing back; the holder's own return, after
// all of them and after a snapshot, gives back what it says.
func TestOnlyTheHolderGivesAShareBack(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	t0 := int64(1e18)
	c := inlineCheck("k", hundredBurst, 10)
	sh := a.allow(t0, askFor(Request{Checks: []Check{c}}, 40, time.Second))[0].Share
	if sh == nil || sh.Units != 40 {
		t.Fatalf("share %+v, want 40 units", sh)
	}
	tests := []struct {
		name    string
		holder  string
		proof   []byte
		unspent int64
		code    contract.Code
		field   string
	}{
		{"another caller with the right secret", "mallory", ShareProof(testSecret), 40, contract.CodePermissionDenied, "id"},
		{"the holder's name with a guessed secret", testHolder, ShareProof([]byte("guess")), 40, contract.CodePermissionDenied, "id"},
		{"the holder's name without a secret", testHolder, nil, 40, contract.CodePermissionDenied, "id"},
		{"a node's name", NodeHolder("n1"), ShareProof(testSecret), 40, contract.CodePermissionDenied, "id"},
		{"the holder claiming more than the share", testHolder, ShareProof(testSecret), 41, contract.CodeInvalidArgument, "unspent"},
	}
	for _, tt := range tests {
		got := a.returnShareAs(t0+1, c, sh.ID, tt.unspent, tt.holder, tt.proof)
		if e, ok := got.(*contract.Error); !ok || e.Code != tt.code || e.Field != tt.field {
			t.Errorf("%s: answered %v, want %s naming %q", tt.name, got, tt.code, tt.field)
		}
		if left := a.remaining(t0+1, c); left != 50 {
			t.Fatalf("%s: %d left, want the 50 the request and share left", tt.name, left)
		}
	}
	restored := New(nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(mustSnapshot(t, a.fsm)))); err != nil {
		t.Fatal(err)
	}
	a.fsm = restored
	if got := a.returnShare(t0+2, c, sh.ID, 40); got != 40 {
		t.Errorf("the holder gave back %d after a snapshot, want 40", got)
	}
}

// TestPolicyChangeWaitsForTheShares: a key holding shares stays under the
// limit they were granted under until they end, and gets no new share
// meanwhile; then it moves to the new limit.
func TestPolicyChangeWaitsForTheShares(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	t0 := int64(1e18)
	p := contract.Policy{Name: "api", Limit: hundredBurst, LocalShares: &contract.LocalShares{}}
	if err := a.put(p); err != nil {
		t.Fatal(err)
	}
	c := policyCheck("k", "api", nil, 1)
	sh := a.allow(t0, askFor(Request{Checks: []Check{c}}, 100, time.Second))[0].Share
	if sh == nil {
		t.Fatal("no share granted")
	}
	p.Limit = algorithms.Limit{Rate: 10, Period: time.Minute, Burst: 10}
	if err := a.put(p); err != nil {
		t.Fatal(err)
	}
	r := a.allow(t0+1, askFor(Request{Checks: []Check{c}}, 5, time.Second))[0]
	if r.Checks[0].Decision.Limit != 100 || r.Share != nil {
		t.Errorf("while the share is out: limit %d, share %+v; want the old limit and no share", r.Checks[0].Decision.Limit, r.Share)
	}
	r = a.allow(sh.UntilNanos, Request{Checks: []Check{c}})[0]
	if r.Checks[0].Decision.Limit != 10 {
		t.Errorf("once the share ended: limit %d, want 10", r.Checks[0].Decision.Limit)
	}
}

// TestSharesSurviveASnapshot: a restored state holds the same shares,
// charged the same, and lists them outstanding.
func TestSharesSurviveASnapshot(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	t0 := int64(1e18)
	for _, l := range []algorithms.Limit{hundredBurst, {Algorithm: algorithms.SlidingWindowLog, Rate: 100, Period: time.Minute}} {
		a.allow(t0, askFor(one("k", l, 1), 30, time.Second))
	}
	snap := mustSnapshot(t, a.fsm)
	restored := New(nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if again := mustSnapshot(t, restored); !bytes.Equal(again, snap) {
		t.Error("the restored state differs")
	}
	if got := restored.OutstandingShares(); len(got) != 1 || got[0].Shares != 2 || got[0].Units != 60 {
		t.Errorf("restored outstanding %+v, want 2 shares of 60 units", got)
	}
}

// TestNoShareIsGrantedWhileARestoreIsStaged: between a restore's begin and
// its commit, asks are answered without a share, so that no holder spends
// past the commit a share the restored state does not charge.
func TestNoShareIsGrantedWhileARestoreIsStaged(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	c := inlineCheck("k", hundredBurst, 1)
	if sh := a.allow(t0, askFor(Request{Checks: []Check{c}}, 10, time.Second))[0].Share; sh == nil {
		t.Fatal("no share before the restore")
	}
	data, err := Encode(CommandRestoreBegin, &RestoreBeginCommand{ID: "r1", Bytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	a.raw(data)
	r := a.allow(t0+1, askFor(Request{Checks: []Check{c}}, 10, time.Second))[0]
	if !r.Allowed || r.Share != nil {
		t.Fatalf("while a restore is staged: %+v, want an admission without a share", r)
	}
}
