package main

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
)

// TestBoundsPerCaller runs a node with tokens and small bounds per caller,
// as an operator sets them with -max-wait-per-caller and
// -max-leases-per-caller. One decide token used to send 61 requests with
// max_wait 1h and shut every other caller out of a shared key for an hour,
// to acquire leases until the cluster's million were taken, and to release
// another token's lease. Now max_wait past the bound is a 400 that names
// it, the debt a caller's reservations put on a shared key is within it, a
// caller at its lease bound is refused (and another is not), and a lease
// is renewed or given back only by the token that holds it, or an admin.
func TestBoundsPerCaller(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	aliceToken, aliceEntry := newToken(t, "alice", "decide")
	bobToken, bobEntry := newToken(t, "bob", "decide")
	opsToken, opsEntry := newToken(t, "ops", "admin")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, aliceEntry, bobEntry, opsEntry)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"),
		"-auth", tokens, "-max-wait-per-caller", "2s", "-max-leases-per-caller", "3"}, nil)
	as := func(token string) *client.Client { return client.NewWithOptions(client.Options{Token: token}, n.addr) }
	alice, bob, ops := as(aliceToken), as(bobToken), as(opsToken)

	shared := &client.Limit{Rate: 1, Period: time.Second}
	_, err := alice.Allow(ctx, client.AllowRequest{Key: "shared", Limit: shared, MaxWait: time.Hour})
	if apiErr := (*client.Error)(nil); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Field != "max_wait" || !strings.Contains(apiErr.Message, "2s") {
		t.Fatalf("max_wait 1h over a bound of 2s: %v, want a 400 naming the bound", err)
	}
	reserved, started := 0, time.Now()
	for range 61 {
		d, err := alice.Allow(ctx, client.AllowRequest{Key: "shared", Limit: shared, MaxWait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			reserved++
		}
	}
	// A bucket of one a second with a debt of at most 2 s: the one token,
	// the 2 s of debt, and what refilled while the 61 calls went on.
	most := 3 + int(time.Since(started)/time.Second) + 1
	d, err := bob.Allow(ctx, client.AllowRequest{Key: "shared", Limit: shared})
	if err != nil || d.Allowed || d.ExactRetryAfter > 3*time.Second || reserved > most {
		t.Fatalf("after %d reservations of alice's (at most %d), bob: %+v, %v; want a denial for at most the 2s bound", reserved, most, d, err)
	}

	var held []string
	for range 3 {
		l, err := alice.AcquireLease(ctx, client.LeaseRequest{Key: "jobs", Max: 100, TTL: time.Minute})
		if err != nil || !l.Granted {
			t.Fatalf("alice's lease: %+v, %v", l, err)
		}
		held = append(held, l.ID)
	}
	_, err = alice.AcquireLease(ctx, client.LeaseRequest{Key: "jobs", Max: 100, TTL: time.Minute})
	if apiErr := (*client.Error)(nil); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || !strings.Contains(apiErr.Message, `"alice"`) {
		t.Fatalf("alice's fourth lease over a bound of 3: %v, want a 503 naming her", err)
	}
	if l, err := bob.AcquireLease(ctx, client.LeaseRequest{Key: "jobs", Max: 100, TTL: time.Minute}); err != nil || !l.Granted {
		t.Fatalf("bob's lease while alice is at her bound: %+v, %v", l, err)
	}

	denied := func(what string, err error) {
		t.Helper()
		if apiErr := (*client.Error)(nil); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden || apiErr.Code != "permission_denied" {
			t.Fatalf("bob %s alice's lease: %v, want a 403", what, err)
		}
	}
	denied("releases", bob.ReleaseLease(ctx, held[0]))
	_, err = bob.RenewLease(ctx, held[0], time.Minute)
	denied("renews", err)
	if err := ops.ReleaseLease(ctx, held[0]); err != nil {
		t.Fatalf("an admin releases alice's lease: %v", err)
	}
	if _, err := alice.RenewLease(ctx, held[1], time.Minute); err != nil {
		t.Fatalf("alice renews her lease: %v", err)
	}
	if err := alice.ReleaseLease(ctx, held[1]); err != nil {
		t.Fatalf("alice releases her lease: %v", err)
	}
}
