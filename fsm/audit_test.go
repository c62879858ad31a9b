package fsm

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
)

// audited applies an operator's command as the leader writes it: inside
// CommandAudited, stamped.
func (a *applier) audited(actor string, now int64, ct CommandType, body any) any {
	a.t.Helper()
	data, err := EncodeAudited(actor, ct, body)
	if err != nil {
		a.t.Fatal(err)
	}
	req, err := DecodeRequest(data)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Stamp(now)
	if data, err = req.Encode(); err != nil {
		a.t.Fatal(err)
	}
	return a.raw(data)
}

func TestTheAuditTrailRecordsEveryChange(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	var raises int
	a.fsm.OnRaise(func(string) { raises++ })
	a.allow(t0, one("k", hourly(10), 5))
	steps := []struct {
		ct      CommandType
		body    any
		refused bool
		want    contract.AuditEntry
	}{
		{CommandPutPolicy, &contract.Policy{Name: "api", Limit: hourly(100), Overrides: []contract.Override{{Key: "vip", Limit: hourly(1000)}}}, false,
			contract.AuditEntry{Actor: "alice", Action: "policy.put", Subject: "api", Detail: "token_bucket 100 per 1h0m0s, 1 overrides"}},
		{CommandDeletePolicy, &NamedDeleteCommand{Name: "nope"}, true, contract.AuditEntry{}},
		{CommandPutBlock, &BlockCommand{Key: "k", Reason: "abuse", TTLNanos: int64(time.Hour)}, false,
			contract.AuditEntry{Actor: "alice", Action: "block.put", Subject: "k", Detail: "for 1h0m0s: abuse"}},
		{CommandDeleteBlock, &BlockCommand{Key: "k"}, false, contract.AuditEntry{Actor: "alice", Action: "block.delete", Subject: "k"}},
		{CommandResetKey, &NamedDeleteCommand{Name: "k"}, false, contract.AuditEntry{Actor: "alice", Action: "key.reset", Subject: "k", Detail: "1 limits"}},
		{CommandDeletePolicy, &NamedDeleteCommand{Name: "api"}, false, contract.AuditEntry{Actor: "alice", Action: "policy.delete", Subject: "api"}},
	}
	var want []contract.AuditEntry
	for i, st := range steps {
		now := t0 + int64(i+1)*int64(time.Second)
		resp := a.audited("alice", now, st.ct, st.body)
		if _, refused := resp.(*contract.Error); refused != st.refused {
			t.Fatalf("step %d answered %#v", i, resp)
		}
		if !st.refused {
			st.want.Index, st.want.AtNanos = a.index, now
			want = append(want, st.want)
		}
	}
	page := a.fsm.AuditPage(0, 100)
	if fmt.Sprint(page.Entries) != fmt.Sprint(want) || page.Next != 0 || page.Dropped != 0 {
		t.Fatalf("the trail:\n%v\nwant\n%v", page.Entries, want)
	}
	if raises != 5 { // the policy put and both deletes (a raise by its type, refused or not), the lift, the reset
		t.Fatalf("%d raises, want 5", raises)
	}
	// Pages, after an index.
	if p := a.fsm.AuditPage(want[0].Index, 2); len(p.Entries) != 2 || p.Entries[0] != want[1] || p.Next != want[2].Index {
		t.Fatalf("the page after %d: %+v", want[0].Index, p)
	}
	if r := a.fsm.RecentAudit(2); len(r) != 2 || r[0] != want[4] || r[1] != want[3] {
		t.Fatalf("the recent ones: %+v", r)
	}
	// A change outside the FSM, recorded by the leader.
	data, _ := Encode(CommandAudit, &AuditCommand{NowNanos: t0 + int64(time.Minute), Actor: "bob", Action: contract.AuditMemberJoin, Subject: "n4"})
	a.raw(data)
	if r := a.fsm.RecentAudit(1); r[0].Actor != "bob" || r[0].Action != "member.join" || r[0].Index != a.index {
		t.Fatalf("the membership record: %+v", r)
	}
}

func TestTheAuditTrailIsBounded(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	for i := range contract.MaxAuditEntries + 5 {
		a.audited("ops", t0+int64(i), CommandPutPolicy, &contract.Policy{Name: "p", Limit: hourly(int64(i%50 + 1))})
	}
	page := a.fsm.AuditPage(0, contract.MaxAuditPage)
	if page.Dropped != 5 || page.Entries[0].Index != 6 || len(a.fsm.audit.live()) != contract.MaxAuditEntries {
		t.Fatalf("dropped %d, oldest %d, %d kept", page.Dropped, page.Entries[0].Index, len(a.fsm.audit.live()))
	}
}

// TestARestoreKeepsTheClustersTrail: a backup carries no trail; the state
// restored in its place holds the cluster's, and decides as the backup.
func TestARestoreKeepsTheClustersTrail(t *testing.T) {
	t.Parallel()
	src := newApplier(t)
	src.audited("alice", t0, CommandPutPolicy, &contract.Policy{Name: "old", Limit: hourly(1)})
	_, backup := src.fsm.Backup()
	state := restoreOf(t, src.fsm)
	dst := newApplier(t)
	dst.audited("bob", t0, CommandPutPolicy, &contract.Policy{Name: "new", Limit: hourly(2)})
	dst.command(CommandRestoreBegin, &RestoreBeginCommand{ID: "r1", Bytes: int64(len(state)), Sum: sha256.Sum256(state)})
	dst.command(CommandRestoreChunk, &RestoreChunkCommand{ID: "r1", Data: state})
	if got, ok := dst.command(CommandRestoreCommit, &RestoreEndCommand{ID: "r1", NowNanos: t0}).(*RestoreResult); !ok {
		t.Fatalf("the restore's commit: %v", got)
	}
	if _, ok := dst.fsm.Policy("old"); !ok {
		t.Fatal("the backup's policy is missing")
	}
	if r := dst.fsm.RecentAudit(5); len(r) != 1 || r[0].Actor != "bob" {
		t.Fatalf("the trail after the restore: %+v", r)
	}
	if a, b := backup.LimitsDigest(), limitsDigest(dst.fsm); a != b {
		t.Fatal("the restored limits differ from the backup's")
	}
}

func limitsDigest(f *FSM) [32]byte {
	_, d := f.LimitsDigest()
	return d
}
