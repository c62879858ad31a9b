package httpapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
)

func (f *fakeLimiter) AcquireLease(_ context.Context, req contract.LeaseRequest) (contract.Lease, error) {
	key, maxHolders, ttl := req.Key, req.Max, req.TTL
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leases == nil {
		f.leases = map[string]string{}
	}
	held := int64(0)
	for _, k := range f.leases {
		if k == key {
			held++
		}
	}
	if held >= maxHolders {
		return contract.Lease{Key: key, Max: maxHolders, Active: held, RetryAfter: 1500 * time.Millisecond}, nil
	}
	id := fmt.Sprintf("lease-%d", len(f.leases)+1)
	f.leases[id] = key
	return contract.Lease{ID: id, Key: key, Max: maxHolders, Granted: true, Active: held + 1, AtNanos: f.now, ExpiresAtNanos: f.now + int64(ttl)}, nil
}

func (f *fakeLimiter) RenewLease(_ context.Context, id string, ttl time.Duration) (contract.Lease, error) {
	if err := contract.ValidateLeaseTTL(ttl); err != nil {
		return contract.Lease{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key, ok := f.leases[id]
	if !ok {
		return contract.Lease{}, contract.NotFound("id", "no lease %q", id)
	}
	return contract.Lease{ID: id, Key: key, Max: 1, Granted: true, Active: 1, AtNanos: f.now, ExpiresAtNanos: f.now + int64(ttl)}, nil
}

func (f *fakeLimiter) ReleaseLease(_ context.Context, id string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.leases[id]; !ok {
		return 0, contract.NotFound("id", "no lease %q", id)
	}
	delete(f.leases, id)
	return f.now, nil
}

func (f *fakeLimiter) Leases(key string) (int64, []contract.HeldLease, []contract.QueuedLease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []contract.HeldLease
	for id, k := range f.leases {
		if k == key {
			out = append(out, contract.HeldLease{ID: id, Key: key, Max: 5, ExpiresAtNanos: f.now + int64(time.Minute)})
		}
	}
	return f.now, out, nil
}

func TestLeaseEndpoints(t *testing.T) {
	t.Parallel()
	api := newTestAPI(newFake())
	const body = `{"key":"exports","max":1,"ttl":"30s"}`
	rec := do(t, api, "POST", "/v1/leases", body)
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || got != `{"granted":true,"id":"lease-1","key":"exports","max":1,"active":1,"expires_in_ms":30000,"retry_after_ms":0,"waiting":0}` {
		t.Fatalf("acquire: %d %s", rec.Code, got)
	}
	rec = do(t, api, "GET", "/v1/leases?key=exports", "")
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || got != `{"key":"exports","leases":[{"id":"lease-1","max":5,"expires_in_ms":60000}],"waiting":[]}` {
		t.Fatalf("list: %d %s", rec.Code, got)
	}
	if rec := do(t, api, "GET", "/v1/leases", ""); rec.Code != 400 || decodeBody(t, rec)["field"] != "key" {
		t.Fatalf("list without a key: %d %s", rec.Code, rec.Body)
	}
	rec = do(t, api, "POST", "/v1/leases", body)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "3" || !strings.Contains(rec.Body.String(), `"retry_after_ms":1500`) {
		t.Fatalf("acquire while full: %d %s Retry-After %q", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	rec = do(t, api, "POST", "/v1/leases/lease-1/renew", `{"ttl":"2m"}`)
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || got != `{"granted":true,"id":"lease-1","key":"exports","max":1,"active":1,"expires_in_ms":120000,"retry_after_ms":0,"waiting":0}` {
		t.Fatalf("renew: %d %s", rec.Code, got)
	}
	for _, bad := range []string{`{}`, `{"ttl":"soon"}`, `{"ttl":"25h"}`} {
		if rec := do(t, api, "POST", "/v1/leases/lease-1/renew", bad); rec.Code != 400 || decodeBody(t, rec)["field"] != "ttl" {
			t.Errorf("renew with %s: %d %s", bad, rec.Code, rec.Body)
		}
	}
	if rec := do(t, api, "DELETE", "/v1/leases/lease-1", ""); rec.Code != 200 {
		t.Fatalf("release: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, api, "DELETE", "/v1/leases/lease-1", ""); rec.Code != 404 {
		t.Fatalf("release again: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, api, "POST", "/v1/leases/lease-1/renew", `{"ttl":"1m"}`); rec.Code != 404 {
		t.Fatalf("release again: %d %s", rec.Code, rec.Body)
	}
	bad := []struct{ body, field string }{
		{`{"max":1,"ttl":"1s"}`, "key"},
		{`{"key":"k","ttl":"1s"}`, "max"},
		{`{"key":"k","max":0,"ttl":"1s"}`, "max"},
		{`{"key":"k","max":1}`, "ttl"},
		{`{"key":"k","max":1,"ttl":"25h"}`, "ttl"},
		{`{"key":"k","max":1,"ttl":"soon"}`, "ttl"},
		{`{"key":"k","max":1.5,"ttl":"1s"}`, "max"},
		{`{"key":"k","max":1,"ttl":"1s","max_wait":"later","max_queue":1}`, "max_wait"},
		{`{"key":"k","max":1,"ttl":"1s","max_wait":"11m","max_queue":1}`, "max_wait"},
		{`{"key":"k","max":1,"ttl":"1s","max_wait":"-1s","max_queue":1}`, "max_wait"},
		{`{"key":"k","max":1,"ttl":"1s","max_wait":"1s"}`, "max_queue"},
		{`{"key":"k","max":1,"ttl":"1s","max_wait":"1s","max_queue":10001}`, "max_queue"},
		{`{"key":"k","max":1,"ttl":"1s","max_queue":5}`, "max_queue"},
		{`{"key":"k","max":1,"ttl":"1s","max_wait":"1s","max_queue":"5"}`, "max_queue"},
	}
	for _, tt := range bad {
		if rec := do(t, api, "POST", "/v1/leases", tt.body); rec.Code != 400 || decodeBody(t, rec)["field"] != tt.field {
			t.Errorf("%s: %d %s", tt.body, rec.Code, rec.Body)
		}
	}
}
