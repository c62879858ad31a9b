package fsm

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
)

func (a *applier) lease(ct CommandType, cmd LeaseCommand) *LeaseResult {
	a.t.Helper()
	data, err := Encode(ct, &cmd)
	if err != nil {
		a.t.Fatal(err)
	}
	r, ok := a.raw(data).(*LeaseResult)
	if !ok {
		a.t.Fatal("apply did not return a *LeaseResult")
	}
	return r
}

func acquire(id string, now int64) LeaseCommand {
	return LeaseCommand{NowNanos: now, ID: id, Key: "reports", Max: 2, TTLNanos: int64(10 * time.Second)}
}

func TestLeasesLimitConcurrency(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	if r := a.lease(CommandAcquireLease, acquire("a", t0)); !r.Granted || r.Active != 1 || r.ExpiresAtNanos != t0+int64(10*time.Second) {
		t.Fatalf("first: %+v", r)
	}
	if r := a.lease(CommandAcquireLease, acquire("b", t0+int64(time.Second))); !r.Granted || r.Active != 2 {
		t.Fatalf("second: %+v", r)
	}
	// Full: the earliest lease, a, expires 9s from now.
	if r := a.lease(CommandAcquireLease, acquire("c", t0+int64(time.Second))); r.Granted || r.RetryAfterNanos != int64(9*time.Second) {
		t.Fatalf("third: %+v", r)
	}
	// Asking again with a held ID is answered with that lease (a retry).
	if r := a.lease(CommandAcquireLease, acquire("a", t0+int64(2*time.Second))); !r.Granted || r.Active != 2 || r.ExpiresAtNanos != t0+int64(10*time.Second) {
		t.Fatalf("retry of a: %+v", r)
	}
	// Another maximum for the same key is another group.
	other := acquire("d", t0)
	other.Max = 1
	if r := a.lease(CommandAcquireLease, other); !r.Granted || r.Active != 1 {
		t.Fatalf("another group: %+v", r)
	}
	// Giving b back frees a slot.
	if r := a.lease(CommandReleaseLease, LeaseCommand{NowNanos: t0 + int64(3*time.Second), ID: "b"}); !r.Released || r.Active != 1 {
		t.Fatalf("release b: %+v", r)
	}
	if r := a.lease(CommandReleaseLease, LeaseCommand{NowNanos: t0 + int64(3*time.Second), ID: "b"}); r.Rejection == nil || r.Rejection.Code != contract.CodeNotFound {
		t.Fatalf("release b again: %+v", r)
	}
	if r := a.lease(CommandAcquireLease, acquire("c", t0+int64(3*time.Second))); !r.Granted {
		t.Fatalf("c after b: %+v", r)
	}
	// a expires exactly at its TTL: one nanosecond before, the group is full.
	if r := a.lease(CommandAcquireLease, acquire("e", t0+int64(10*time.Second)-1)); r.Granted || r.RetryAfterNanos != 1 {
		t.Fatalf("e before a expires: %+v", r)
	}
	if r := a.lease(CommandAcquireLease, acquire("e", t0+int64(10*time.Second))); !r.Granted || r.Active != 2 {
		t.Fatalf("e when a expires: %+v", r)
	}
}

func TestLeaseRejections(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.lease(CommandAcquireLease, acquire("a", t0))
	bad := []struct {
		name  string
		cmd   LeaseCommand
		field string
	}{
		{"an empty ID", LeaseCommand{NowNanos: t0, Key: "k", Max: 1, TTLNanos: 1e9}, "id"},
		{"an empty key", LeaseCommand{NowNanos: t0, ID: "x", Max: 1, TTLNanos: 1e9}, "key"},
		{"max 0", LeaseCommand{NowNanos: t0, ID: "x", Key: "k", Max: 0, TTLNanos: 1e9}, "max"},
		{"a TTL over a day", LeaseCommand{NowNanos: t0, ID: "x", Key: "k", Max: 1, TTLNanos: int64(25 * time.Hour)}, "ttl"},
		{"a held ID for another key", LeaseCommand{NowNanos: t0, ID: "a", Key: "other", Max: 2, TTLNanos: 1e9}, "id"},
	}
	for _, tt := range bad {
		if r := a.lease(CommandAcquireLease, tt.cmd); r.Rejection == nil || r.Rejection.Field != tt.field || r.Granted {
			t.Errorf("%s: %+v", tt.name, r)
		}
	}
}

func TestLeasesSurviveSnapshots(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.lease(CommandAcquireLease, acquire("a", t0))
	a.lease(CommandAcquireLease, acquire("b", t0))
	snap := mustSnapshot(t, a.fsm)
	b := newApplier(t)
	if err := b.fsm.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, mustSnapshot(t, b.fsm)) {
		t.Fatal("the restored leases snapshot differently")
	}
	if r := b.lease(CommandAcquireLease, acquire("c", t0+1)); r.Granted {
		t.Fatal("the restored group forgot its holders")
	}
	if r := b.lease(CommandReleaseLease, LeaseCommand{NowNanos: t0 + 1, ID: "a"}); !r.Released {
		t.Fatalf("release after restore: %+v", r)
	}
}

func TestLeaseRenewalMovesExpiry(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	a.lease(CommandAcquireLease, acquire("a", t0))                    // expires t0+10s
	a.lease(CommandAcquireLease, acquire("b", t0+int64(time.Second))) // expires t0+11s
	r := a.lease(CommandRenewLease, LeaseCommand{NowNanos: t0 + int64(2*time.Second), ID: "a", TTLNanos: int64(time.Minute)})
	if !r.Granted || r.ExpiresAtNanos != t0+int64(62*time.Second) || r.Key != "reports" || r.Max != 2 {
		t.Fatalf("renew a: %+v", r)
	}
	// b is now the earliest to expire.
	if r := a.lease(CommandAcquireLease, acquire("c", t0+int64(2*time.Second))); r.Granted || r.RetryAfterNanos != int64(9*time.Second) {
		t.Fatalf("c while full: %+v", r)
	}
	if r := a.lease(CommandAcquireLease, acquire("c", t0+int64(11*time.Second))); !r.Granted {
		t.Fatalf("c after b expired: %+v", r)
	}
	bad := []struct {
		name  string
		cmd   LeaseCommand
		field string
	}{
		{"a lease not held", LeaseCommand{NowNanos: t0 + int64(11*time.Second), ID: "b", TTLNanos: int64(time.Second)}, "id"},
		{"a TTL over a day", LeaseCommand{NowNanos: t0 + int64(11*time.Second), ID: "a", TTLNanos: int64(25 * time.Hour)}, "ttl"},
		{"no TTL", LeaseCommand{NowNanos: t0 + int64(11*time.Second), ID: "a"}, "ttl"},
	}
	for _, tt := range bad {
		if r := a.lease(CommandRenewLease, tt.cmd); r.Rejection == nil || r.Rejection.Field != tt.field {
			t.Errorf("%s: %+v", tt.name, r)
		}
	}
}
