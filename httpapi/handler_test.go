package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

// fakeLimiter decides with the real algorithms on in-memory state at a
// fixed instant, resolves policies from a map, and can be told to fail.
type fakeLimiter struct {
	mu        sync.Mutex
	now       int64
	states    map[string]algorithms.State
	policies  map[string]contract.Policy
	err       error
	last      contract.Request
	batches   int
	joined    []contract.Member
	removed   []string
	ready     bool
	shareIDs  uint64            // the last share granted
	notLeader bool              // Restore answers *contract.NotLeaderError
	leases    map[string]string // lease ID → key
	domains   map[string]rls.Config
	buckets   map[string]fakeBucket // states' key → what it counts
	blocks    map[string]contract.Block
	audit     []contract.AuditEntry
	settles   map[string]*fakeSettlement
	// readErr, when set, is what every read of the stores returns, as a
	// node that cannot get a read index does.
	readErr error
}

// fakeSettlement is a reservation of the fake: the cost reserved, and the
// settlement once settled.
type fakeSettlement struct {
	reserved int64
	settled  *contract.Settlement
}

func (f *fakeLimiter) Settle(_ context.Context, req contract.SettleRequest) (contract.Settlement, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return contract.Settlement{}, f.err
	}
	s := f.settles[req.ID]
	switch {
	case s == nil:
		return contract.Settlement{}, contract.NotFound("settlement_id", "no open reservation %s", req.ID)
	case s.settled != nil && s.settled.Cost != req.Cost:
		return contract.Settlement{}, contract.Conflict("settlement_id", "the reservation %s was settled already, with cost %d", req.ID, s.settled.Cost)
	case s.settled != nil:
		out := *s.settled
		out.Duplicate = true
		return out, nil
	}
	out := contract.Settlement{ID: req.ID, Upfront: s.reserved, Cost: req.Cost, Refunded: max(s.reserved-req.Cost, 0), Charged: max(req.Cost-s.reserved, 0)}
	if out.Charged > 0 {
		out.RetryAfter = time.Second
	}
	s.settled = &out
	return out, nil
}

// fakeBucket is what one of the fake's states counts: a key under a limit.
type fakeBucket struct {
	key   string
	limit algorithms.Limit
}

func newFake() *fakeLimiter {
	return &fakeLimiter{now: 1e18, states: make(map[string]algorithms.State), policies: make(map[string]contract.Policy), domains: make(map[string]rls.Config), buckets: make(map[string]fakeBucket), blocks: make(map[string]contract.Block), settles: make(map[string]*fakeSettlement), ready: true}
}

func (f *fakeLimiter) Allow(_ context.Context, req contract.Request) (contract.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = req
	if f.err != nil {
		return contract.Decision{}, f.err
	}
	return f.decide(req)
}

func (f *fakeLimiter) decide(req contract.Request) (contract.Decision, error) {
	d := contract.Decision{Allowed: true}
	for i, c := range req.Checks {
		if b, ok := f.blocks[c.Key]; ok && c.Key != "" {
			d = contract.Decision{AtNanos: f.now, Blocked: &contract.BlockedCheck{Check: i, Block: b},
				DeniedBy: &contract.DeniedBy{Check: i, Policy: c.Policy, Limit: algorithms.Limit{Rate: 1, Period: time.Second, Burst: 1}, Cause: contract.CauseBlock}}
			for j := range req.Checks {
				dec := algorithms.Decision{Allowed: j != i, Limit: 1}
				if j == i {
					dec.RetryAfter = time.Duration(b.UntilNanos - f.now)
				}
				d.Checks = append(d.Checks, contract.CheckDecision{Decision: dec, Period: time.Second, Rate: 1})
			}
			return d, nil
		}
	}
	next := map[string]algorithms.State{}
	for _, c := range req.Checks {
		l, shadow, key := c.Limit, false, c.Key
		if c.Policy != "" {
			p, ok := f.policies[c.Policy]
			if !ok {
				return contract.Decision{}, contract.NotFound("policy", "policy %q does not exist", c.Policy)
			}
			l, shadow = p.Limit, p.Shadow
			for _, d := range c.Dimensions {
				if d.Name == "user" {
					key = d.Value
				}
			}
		}
		id := fmt.Sprint(key, l)
		dec, s := algorithms.Reserve(l, f.states[id], f.now, c.Consumes(), req.MaxWait)
		d.Checks = append(d.Checks, contract.CheckDecision{Decision: dec, Period: l.Period, Rate: l.Rate, Shadow: shadow})
		d.Allowed = d.Allowed && (dec.Allowed || shadow)
		if !dec.Allowed && !shadow && d.DeniedBy == nil {
			d.DeniedBy = &contract.DeniedBy{Check: len(d.Checks) - 1, Policy: c.Policy, Limit: l, Cause: contract.CauseLimit}
			if c.Policy != "" {
				d.DeniedBy.PolicyVersion = 7
			}
		}
		next[id] = s
	}
	if d.Allowed {
		for id, s := range next {
			f.states[id] = s
		}
		for _, c := range req.Checks {
			if c.Policy == "" {
				f.buckets[fmt.Sprint(c.Key, c.Limit)] = fakeBucket{c.Key, c.Limit}
			}
		}
		if req.SettleTTL > 0 {
			d.SettlementID = fmt.Sprint("s", len(f.settles)+1)
			f.settles[d.SettlementID] = &fakeSettlement{reserved: req.Checks[0].Consumes()}
		}
		if req.Share != nil && req.Checks[0].Policy == "" {
			f.grantShare(req, &d)
		}
	}
	return d, nil
}

// grantShare grants an inline check's share ask as the cluster would
// charge it, for the answer's share to be checked against the document.
func (f *fakeLimiter) grantShare(req contract.Request, d *contract.Decision) {
	c := req.Checks[0]
	id := fmt.Sprint(c.Key, c.Limit)
	f.shareIDs++
	sh, s, ok := algorithms.Grant(c.Limit, f.states[id], f.now, min(req.Share.Units, c.Limit.Capacity()), req.Share.TTLOrDefault(), f.shareIDs)
	if !ok {
		return
	}
	f.states[id] = s
	after, _ := algorithms.Decide(c.Limit, s, f.now, 0)
	d.Share = &contract.GrantedShare{Token: contract.ShareToken{ID: sh.ID, Secret: contract.NewShareSecret()}, Units: sh.Units, SpendFor: time.Duration(sh.Until - f.now - int64(time.Millisecond)), Remaining: after.Remaining}
}

func (f *fakeLimiter) keyState(key string) (contract.KeyState, bool) {
	out := contract.KeyState{Key: key}
	for id, b := range f.buckets {
		if b.key == key {
			d, _ := algorithms.Decide(b.limit, f.states[id], f.now, 0)
			out.Limits = append(out.Limits, contract.KeyLimit{Limit: b.limit, Decision: d})
		}
	}
	return out, len(out.Limits) > 0
}

func (f *fakeLimiter) Key(_ context.Context, key string) (contract.KeyState, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return contract.KeyState{}, false, f.readErr
	}
	ks, ok := f.keyState(key)
	return ks, ok, nil
}

func (f *fakeLimiter) Keys(_ context.Context, prefix, after string, limit int) ([]contract.KeyState, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return nil, "", f.readErr
	}
	var keys []string
	for _, b := range f.buckets {
		if strings.HasPrefix(b.key, prefix) && b.key > after && !slices.Contains(keys, b.key) {
			keys = append(keys, b.key)
		}
	}
	slices.Sort(keys)
	next := ""
	if len(keys) > limit {
		keys, next = keys[:limit], keys[limit-1]
	}
	var page []contract.KeyState
	for _, k := range keys {
		ks, _ := f.keyState(k)
		page = append(page, ks)
	}
	return page, next, nil
}

func (f *fakeLimiter) ResetKey(_ context.Context, key string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for id, b := range f.buckets {
		if b.key == key {
			delete(f.buckets, id)
			delete(f.states, id)
			n++
		}
	}
	if n == 0 {
		return 0, contract.NotFound("key", "the key %q holds no state", key)
	}
	return n, nil
}

func (f *fakeLimiter) PutBlock(ctx context.Context, req contract.BlockRequest) (contract.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return contract.Block{}, f.err
	}
	f.record(ctx, contract.AuditBlockPut, req.Key)
	b := contract.Block{Key: req.Key, Reason: req.Reason, SinceNanos: f.now, UntilNanos: f.now + int64(req.TTL)}
	f.blocks[req.Key] = b
	return b, nil
}

func (f *fakeLimiter) DeleteBlock(_ context.Context, key string) (contract.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.blocks[key]
	if !ok {
		return contract.Block{}, contract.NotFound("key", "the key %q is not blocked", key)
	}
	delete(f.blocks, key)
	return b, nil
}

func (f *fakeLimiter) Blocks(_ context.Context, after string, limit int) (int64, []contract.Block, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return 0, nil, "", f.readErr
	}
	var page []contract.Block
	for _, k := range slices.Sorted(maps.Keys(f.blocks)) {
		if k > after {
			page = append(page, f.blocks[k])
		}
	}
	next := ""
	if len(page) > limit {
		page, next = page[:limit], page[limit-1].Key
	}
	return f.now, page, next, nil
}

func (f *fakeLimiter) BlockSummary(latest int) contract.BlockSummary {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := contract.BlockSummary{AtNanos: f.now}
	for _, k := range slices.Sorted(maps.Keys(f.blocks)) {
		out.Blocked++
		if len(out.Latest) < latest {
			out.Latest = append(out.Latest, f.blocks[k])
		}
	}
	return out
}

// ReturnShare: the fake charges what it grants for ever, so it gives
// nothing back.
func (f *fakeLimiter) ReturnShare(context.Context, contract.ShareReturn) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return 0, f.err
}

func (f *fakeLimiter) AllowBatch(_ context.Context, reqs []contract.Request) ([]contract.BatchResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches++
	if f.err != nil {
		return nil, f.err
	}
	out := make([]contract.BatchResult, len(reqs))
	for i, r := range reqs {
		out[i].Decision, out[i].Err = f.decide(r)
	}
	return out, nil
}

func (f *fakeLimiter) PutPolicy(ctx context.Context, p contract.Policy) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.policies[p.Name] = p
	if f.err == nil {
		f.record(ctx, contract.AuditPolicyPut, p.Name)
	}
	return f.err
}

// record notes a change in the fake's audit trail, by the context's actor.
func (f *fakeLimiter) record(ctx context.Context, action, subject string) {
	f.audit = append(f.audit, contract.AuditEntry{Index: uint64(len(f.audit) + 1), AtNanos: f.now, Actor: contract.ActorOf(ctx), Action: action, Subject: subject})
}

func (f *fakeLimiter) Audit(_ context.Context, since uint64, limit int) (contract.AuditPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return contract.AuditPage{}, f.readErr
	}
	var page contract.AuditPage
	for _, e := range f.audit {
		if e.Index > since && len(page.Entries) < limit {
			page.Entries = append(page.Entries, e)
		}
	}
	if n := len(page.Entries); n > 0 && page.Entries[n-1].Index < uint64(len(f.audit)) {
		page.Next = page.Entries[n-1].Index
	}
	return page, nil
}

func (f *fakeLimiter) RecentAudit(n int) []contract.AuditEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.audit[max(len(f.audit)-n, 0):])
	slices.Reverse(out)
	return out
}

func (f *fakeLimiter) DeletePolicy(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.policies[name]; !ok {
		return contract.NotFound("name", "policy %q does not exist", name)
	}
	delete(f.policies, name)
	return nil
}

func (f *fakeLimiter) Policies(_ context.Context, after string, limit, _ int) ([]contract.PolicyStatus, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return nil, "", f.readErr
	}
	names := slices.Sorted(maps.Keys(f.policies))
	var out []contract.PolicyStatus
	for i, name := range names {
		if name <= after {
			continue
		}
		if len(out) == limit {
			return out, names[i-1], nil
		}
		out = append(out, contract.PolicyStatus{Policy: f.policies[name]})
	}
	return out, "", nil
}

func (f *fakeLimiter) Policy(_ context.Context, name string) (contract.PolicyStatus, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return contract.PolicyStatus{}, false, f.readErr
	}
	p, ok := f.policies[name]
	return contract.PolicyStatus{Policy: p}, ok, nil
}

func (f *fakeLimiter) PutRLSConfig(_ context.Context, c rls.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.domains[c.Domain] = c
	return f.err
}

func (f *fakeLimiter) DeleteRLSConfig(_ context.Context, domain string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.domains[domain]; !ok {
		return contract.NotFound("domain", "rate limit service domain %q does not exist", domain)
	}
	delete(f.domains, domain)
	return nil
}

func (f *fakeLimiter) RLSConfig(_ context.Context, domain string) (rls.Config, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return rls.Config{}, false, f.readErr
	}
	c, ok := f.domains[domain]
	return c, ok, nil
}

func (f *fakeLimiter) RLSDomains(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return nil, f.readErr
	}
	return slices.Sorted(maps.Keys(f.domains)), nil
}

func (f *fakeLimiter) Join(_ context.Context, m contract.Member, _ contract.MemberChange) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.joined = append(f.joined, m)
	return f.err
}

func (f *fakeLimiter) RemoveMember(_ context.Context, id string, _ contract.MemberChange) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == "ghost" {
		return contract.NotFound("id", "no member %q", id)
	}
	f.removed = append(f.removed, id)
	return f.err
}

// fakeBackup is a backup whose file is a fixed text.
type fakeBackup struct{}

func (fakeBackup) Info() contract.BackupInfo                           { return contract.BackupInfo{Index: 120} }
func (fakeBackup) Write(w io.Writer) error                             { _, err := io.WriteString(w, "a backup file"); return err }
func (f *fakeLimiter) Backup(context.Context) (contract.Backup, error) { return fakeBackup{}, f.err }

func (f *fakeLimiter) Restore(_ context.Context, r io.Reader) (contract.BackupInfo, uint64, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return contract.BackupInfo{}, 0, err
	}
	if string(data) != "a backup file" {
		return contract.BackupInfo{}, 0, contract.Invalid("", "not a limitnode backup")
	}
	if f.notLeader {
		return contract.BackupInfo{}, 0, &contract.NotLeaderError{LeaderHTTPAddr: "127.0.0.1:7001"}
	}
	return contract.BackupInfo{Index: 120}, 130, nil
}

func (f *fakeLimiter) TransferLeadership(_ context.Context, to string) error {
	if to == "ghost" {
		return contract.NotFound("to", "no member %q", to)
	}
	return f.err
}

func (f *fakeLimiter) CheckConsistency(context.Context) (contract.ConsistencyReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return contract.ConsistencyReport{}, f.err
	}
	agrees := true
	return contract.ConsistencyReport{Index: 120, Members: []contract.MemberConsistency{{ID: "n1", Agrees: &agrees}}}, nil
}

func (f *fakeLimiter) Stats(_ context.Context, top int) contract.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := contract.Stats{NowNanos: f.now, Seconds: make([]contract.SecondCount, contract.StatsHistorySeconds), TopErrorBound: 1}
	for i := range st.Seconds {
		st.Seconds[i] = contract.SecondCount{UnixSecond: f.now/1e9 - contract.StatsHistorySeconds + 1 + int64(i), Allowed: int64(i % 7), Denied: int64(i % 3)}
	}
	for i, name := range []string{"tenant:<b>evil</b>", "k", "global"}[:min(top, 3)] {
		st.TopDeniedKeys = append(st.TopDeniedKeys, contract.TopCount{Name: name, Count: int64(30 - i), Error: 1})
	}
	st.TopDeniedPolicies = []contract.TopCount{{Name: "per-user", Count: 12}}
	return st
}

func (f *fakeLimiter) Status() contract.Status {
	return contract.Status{SelfID: "n1", SelfRaftAddr: "127.0.0.1:8001", LeaderID: "n1", Term: 3, CommitIndex: 120, AppliedIndex: 119, Members: []contract.MemberStatus{
		{Member: contract.Member{ID: "n1", RaftAddr: "127.0.0.1:8001", HTTPAddr: "127.0.0.1:7001"}, Voter: true, Leader: true},
	}}
}

func (f *fakeLimiter) Ready() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ready {
		return "no leader known"
	}
	return ""
}

func newTestAPI(f *fakeLimiter) *API {
	return New(f, Options{Logger: slog.New(slog.DiscardHandler), Jitter: func(n int64) int64 { return n }})
}

// do serves one request and checks the exchange against api/openapi.yaml,
// so that every handler test also holds the document to the code.
func do(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	return serveValidated(t, h, method, path, body)
}

func decodeBody(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("response is not JSON: %q", rec.Body.String())
	}
	return m
}

func TestBadRequestsGetAClearError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		method     string
		body       string
		wantStatus int
		wantCode   string
		wantField  string
	}{
		{"malformed JSON", "POST", `{"key":`, 400, "invalid_argument", ""},
		{"not JSON at all", "POST", `key=a`, 400, "invalid_argument", ""},
		{"an empty body", "POST", ``, 400, "invalid_argument", ""},
		{"an unknown field", "POST", `{"key":"a","limit":{"rate":1},"colour":"red"}`, 400, "invalid_argument", "colour"},
		{"an unknown nested field", "POST", `{"key":"a","limit":{"rate":1,"ratee":2}}`, 400, "invalid_argument", "limit.ratee"},
		{"an unknown field of a check", "POST", `{"checks":[{"key":"a","limit":{"rate":1}},{"key":"b","limit":{"rate":1,"unit":"second"}}]}`, 400, "invalid_argument", "checks[1].limit.unit"},
		{"a value of the wrong type in a check", "POST", `{"checks":[{"key":"a","limit":{"rate":1}},{"key":"b","limit":{"rate":"1"}}]}`, 400, "invalid_argument", "checks[1].limit.rate"},
		{"a number for an object", "POST", `{"key":"a","limit":5}`, 400, "invalid_argument", "limit"},
		{"data after the JSON value", "POST", `{"key":"a","limit":{"rate":1}} {}`, 400, "invalid_argument", ""},
		{"a field given twice", "POST", `{"key":"a","key":"b","limit":{"rate":1}}`, 400, "invalid_argument", "key"},
		{"a nested field given twice", "POST", `{"key":"a","limit":{"rate":1,"rate":1000}}`, 400, "invalid_argument", "limit.rate"},
		{"a dimension given twice", "POST", `{"policy":"p","dimensions":{"user":"a","user":"b"}}`, 400, "invalid_argument", "dimensions.user"},
		{"a field name in another case", "POST", `{"Key":"a","limit":{"rate":1}}`, 400, "invalid_argument", "Key"},
		{"a field name with a Kelvin sign", "POST", "{\"\u212aey\":\"a\",\"limit\":{\"rate\":1}}", 400, "invalid_argument", "\u212aey"},
		{"a key that is not UTF-8", "POST", "{\"key\":\"a\xff\",\"limit\":{\"rate\":1}}", 400, "invalid_argument", "key"},
		{"a key with a lone surrogate", "POST", `{"key":"a\ud800","limit":{"rate":1}}`, 400, "invalid_argument", "key"},
		{"a check of a batch given twice", "POST", `{"checks":[{"key":"a","key":"b","limit":{"rate":1}}]}`, 400, "invalid_argument", "checks[0].key"},
		{"an empty key", "POST", `{"key":"","limit":{"rate":1}}`, 400, "invalid_argument", "key"},
		{"hold without max_wait", "POST", `{"key":"a","limit":{"rate":1},"hold":true}`, 400, "invalid_argument", "hold"},
		{"local shares of a bad TTL", "POST", `{"key":"a","limit":{"rate":1,"local_shares":{"ttl":"2s"}}}`, 400, "invalid_argument", "limit.local_shares.ttl"},
		{"local shares of more than the capacity", "POST", `{"key":"a","limit":{"rate":5,"local_shares":{"max_units":6}}}`, 400, "invalid_argument", "limit.local_shares.max_units"},
		{"a share asked without units", "POST", `{"key":"a","limit":{"rate":1},"take_share":{}}`, 400, "invalid_argument", "take_share.units"},
		{"a share asked with a request ID", "POST", `{"key":"a","limit":{"rate":1},"request_id":"r","take_share":{"units":5}}`, 400, "invalid_argument", "take_share"},
		{"a share asked for two checks", "POST", `{"checks":[{"key":"a","limit":{"rate":1}},{"key":"b","limit":{"rate":1}}],"take_share":{"units":5}}`, 400, "invalid_argument", "take_share"},
		{"a share asked for too long", "POST", `{"key":"a","limit":{"rate":1},"take_share":{"units":5,"ttl":"1m"}}`, 400, "invalid_argument", "take_share.ttl"},
		{"a key of 513 bytes", "POST", `{"key":"` + strings.Repeat("k", 513) + `","limit":{"rate":1}}`, 400, "invalid_argument", "key"},
		{"no limit", "POST", `{"key":"a"}`, 400, "invalid_argument", "limit"},
		{"no rate", "POST", `{"key":"a","limit":{}}`, 400, "invalid_argument", "limit.rate"},
		{"rate 0", "POST", `{"key":"a","limit":{"rate":0}}`, 400, "invalid_argument", "limit.rate"},
		{"a negative rate", "POST", `{"key":"a","limit":{"rate":-5}}`, 400, "invalid_argument", "limit.rate"},
		{"a fractional rate", "POST", `{"key":"a","limit":{"rate":10.5}}`, 400, "invalid_argument", "limit.rate"},
		{"a rate given as a string", "POST", `{"key":"a","limit":{"rate":"10"}}`, 400, "invalid_argument", "limit.rate"},
		{"an unparseable period", "POST", `{"key":"a","limit":{"rate":1,"period":"a minute"}}`, 400, "invalid_argument", "limit.period"},
		{"a zero period", "POST", `{"key":"a","limit":{"rate":1,"period":"0s"}}`, 400, "invalid_argument", "limit.period"},
		{"a period over a year", "POST", `{"key":"a","limit":{"rate":1,"period":"8761h"}}`, 400, "invalid_argument", "limit.period"},
		{"burst 0", "POST", `{"key":"a","limit":{"rate":1,"burst":0}}`, 400, "invalid_argument", "limit.burst"},
		{"an unknown algorithm", "POST", `{"key":"a","limit":{"rate":1,"algorithm":"magic"}}`, 400, "invalid_argument", "limit.algorithm"},
		{"burst with a window algorithm", "POST", `{"key":"a","limit":{"rate":1,"algorithm":"fixed_window","burst":2}}`, 400, "invalid_argument", "limit.burst"},
		{"a sliding log over its maximum rate", "POST", `{"key":"a","limit":{"rate":10001,"algorithm":"sliding_window_log"}}`, 400, "invalid_argument", "limit.rate"},
		{"a cost above rate for a window", "POST", `{"key":"a","limit":{"rate":10,"algorithm":"sliding_window_counter"},"cost":11}`, 400, "invalid_argument", "cost"},
		{"a negative cost", "POST", `{"key":"a","limit":{"rate":10},"cost":-1}`, 400, "invalid_argument", "cost"},
		{"a cost above burst", "POST", `{"key":"a","limit":{"rate":10,"burst":5},"cost":6}`, 400, "invalid_argument", "cost"},
		{"a request ID of 65 bytes", "POST", `{"key":"a","limit":{"rate":1},"request_id":"` + strings.Repeat("r", 65) + `"}`, 400, "invalid_argument", "request_id"},
		{"a policy and a limit", "POST", `{"key":"a","policy":"p","limit":{"rate":1}}`, 400, "invalid_argument", "limit"},
		{"a bad policy name", "POST", `{"key":"a","policy":"no spaces"}`, 400, "invalid_argument", "policy"},
		{"a policy check without key or dimensions", "POST", `{"policy":"p"}`, 400, "invalid_argument", "key"},
		{"both key and dimensions", "POST", `{"policy":"p","key":"a","dimensions":{"user":"u"}}`, 400, "invalid_argument", "dimensions"},
		{"dimensions without a policy", "POST", `{"key":"a","limit":{"rate":1},"dimensions":{"user":"u"}}`, 400, "invalid_argument", "dimensions"},
		{"empty checks", "POST", `{"checks":[]}`, 400, "invalid_argument", "checks"},
		{"checks and a key together", "POST", `{"key":"a","checks":[{"key":"b","limit":{"rate":1}}]}`, 400, "invalid_argument", "checks"},
		{"a bad check", "POST", `{"checks":[{"key":"b","limit":{"rate":1}},{"key":"c","limit":{"rate":0}}]}`, 400, "invalid_argument", "checks[1].limit.rate"},
		{"duplicate checks", "POST", `{"checks":[{"key":"b","limit":{"rate":1}},{"key":"b","limit":{"rate":1}}]}`, 400, "invalid_argument", "checks[1].key"},
		{"too many checks", "POST", `{"checks":[` + strings.Repeat(`{"key":"b","limit":{"rate":1}},`, 32) + `{"key":"c","limit":{"rate":1}}]}`, 400, "invalid_argument", "checks"},
		{"a body over 64 KiB", "POST", `{"key":"` + strings.Repeat("k", 70<<10) + `"}`, 413, "payload_too_large", ""},
		{"the wrong method", "GET", ``, 405, "method_not_allowed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake()
			rec := do(t, newTestAPI(fake), tt.method, "/v1/allow", tt.body)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tt.wantStatus, rec.Body)
			}
			body := decodeBody(t, rec)
			if body["code"] != tt.wantCode || body["error"] == "" {
				t.Fatalf("body %v, want code %q and an error", body, tt.wantCode)
			}
			if got, _ := body["field"].(string); got != tt.wantField {
				t.Fatalf("field %q, want %q (error: %v)", got, tt.wantField, body["error"])
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if tt.wantStatus == 405 && rec.Header().Get("Allow") != "POST" {
				t.Fatalf("Allow header %q", rec.Header().Get("Allow"))
			}
			if fake.last.Checks != nil {
				t.Fatal("a bad request reached the limiter")
			}
		})
	}
}

func TestAllowedAndDeniedResponses(t *testing.T) {
	t.Parallel()
	api := newTestAPI(newFake())
	const body = `{"key":"api-key:abc123","limit":{"algorithm":"token_bucket","rate":100,"period":"1m","burst":100},"cost":1}`
	rec := do(t, api, "POST", "/v1/allow", body)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if got, want := strings.TrimSpace(rec.Body.String()), `{"allowed":true,"limit":100,"remaining":99,"reset_after_ms":600,"retry_after_ms":0}`; got != want {
		t.Fatalf("body %s, want %s", got, want)
	}
	wantHeaders := map[string]string{
		"RateLimit-Limit":     "100",
		"RateLimit-Remaining": "99",
		"RateLimit-Reset":     "1",
		"RateLimit-Policy":    `"default";q=100;w=60`,
		"RateLimit":           `"default";r=99;t=1`,
		"Retry-After":         "",
	}
	for name, want := range wantHeaders {
		if got := rec.Header().Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	// Spend the rest: the 100th is allowed, the 101st denied.
	for range 98 {
		do(t, api, "POST", "/v1/allow", body)
	}
	if rec := do(t, api, "POST", "/v1/allow", body); rec.Code != 200 || rec.Header().Get("RateLimit-Remaining") != "0" {
		t.Fatalf("100th request: %d, remaining %q", rec.Code, rec.Header().Get("RateLimit-Remaining"))
	}
	rec = do(t, api, "POST", "/v1/allow", body)
	if rec.Code != 429 {
		t.Fatalf("101st request: %d", rec.Code)
	}
	if got, want := strings.TrimSpace(rec.Body.String()), `{"allowed":false,"limit":100,"remaining":0,"reset_after_ms":60000,"retry_after_ms":600,`+
		`"denied_by":{"check":0,"limit":{"algorithm":"token_bucket","rate":100,"period":"1m0s","burst":100},"cause":"limit"}}`; got != want {
		t.Fatalf("body %s, want %s", got, want)
	}
	if got, want := rec.Header().Get("Limitnode-Denied-By"), `"default";check=0;cause=limit;algorithm=token_bucket;rate=100;period_ms=60000;burst=100`; got != want {
		t.Fatalf("Limitnode-Denied-By %q, want %q", got, want)
	}
	// 600ms rounds up to 1s, and the test's jitter takes its maximum, 1s.
	if got := rec.Header().Get("Retry-After"); got != "2" {
		t.Fatalf("Retry-After %q, want 2", got)
	}
	if got := rec.Header().Get("RateLimit"); got != `"default";r=0;t=1` {
		t.Fatalf("RateLimit %q", got)
	}
}

func TestDefaultsApply(t *testing.T) {
	t.Parallel()
	fake := newFake()
	rec := do(t, newTestAPI(fake), "POST", "/v1/allow", `{"key":"k","limit":{"rate":5}}`)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	want := contract.Check{Key: "k", Limit: algorithms.Limit{Rate: 5, Period: time.Second, Burst: 5}, Cost: 1}
	if got := fake.last.Checks[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("check %+v, want %+v", got, want)
	}
	do(t, newTestAPI(fake), "POST", "/v1/allow", `{"key":"k","limit":{"rate":5},"cost":0,"request_id":"abc"}`)
	if got := fake.last; got.Checks[0].Cost != 0 || !got.Checks[0].Peek || got.RequestID != "abc" {
		t.Fatalf("request %+v, want a peek and request ID abc", got)
	}
}

func TestSeveralChecksReportTheMostRestrictive(t *testing.T) {
	t.Parallel()
	api := newTestAPI(newFake())
	const body = `{"checks":[
		{"key":"client:a","limit":{"rate":10,"period":"1s"}},
		{"key":"global","limit":{"rate":2,"period":"1m"}}]}`
	rec := do(t, api, "POST", "/v1/allow", body)
	resp := decodeBody(t, rec)
	if rec.Code != 200 || resp["remaining"] != 1.0 || resp["limit"] != 2.0 {
		t.Fatalf("first: %d %v", rec.Code, resp)
	}
	if checks, _ := resp["checks"].([]any); len(checks) != 2 {
		t.Fatalf("checks %v", resp["checks"])
	}
	if got := rec.Header().Get("RateLimit-Policy"); got != `"default";q=2;w=60` {
		t.Fatalf("RateLimit-Policy %q follows the wrong check", got)
	}
	do(t, api, "POST", "/v1/allow", body)
	rec = do(t, api, "POST", "/v1/allow", body)
	if rec.Code != 429 {
		t.Fatalf("third: %d", rec.Code)
	}
	if resp := decodeBody(t, rec); resp["retry_after_ms"] != 30000.0 {
		t.Fatalf("third: %v", resp)
	}
}

func TestClusterErrorsBecomeStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
	}{
		{"no leader", fmt.Errorf("wrapped: %w", contract.ErrNoLeader), 503, "unavailable"},
		{"an unknown outcome", contract.ErrOutcomeUnknown, 503, "outcome_unknown"},
		{"a node shutting down", contract.ErrShutdown, 503, "unavailable"},
		{"an invalid request", contract.Invalid("rate", "%v", algorithms.ErrRate), 400, "invalid_argument"},
		{"anything else", io.ErrClosedPipe, 500, "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake()
			fake.err = tt.err
			rec := do(t, newTestAPI(fake), "POST", "/v1/allow", `{"key":"k","limit":{"rate":5}}`)
			body := decodeBody(t, rec)
			if rec.Code != tt.wantStatus || body["code"] != tt.wantCode {
				t.Fatalf("got %d %v, want %d %s", rec.Code, body, tt.wantStatus, tt.wantCode)
			}
			if tt.wantStatus == 503 && rec.Header().Get("Retry-After") != "1" {
				t.Fatalf("503 without Retry-After: 1")
			}
		})
	}
}

func TestClusterEndpoints(t *testing.T) {
	t.Parallel()
	fake := newFake()
	api := newTestAPI(fake)

	rec := do(t, api, "GET", "/v1/cluster", "")
	want := `{"self":"n1","self_raft_addr":"127.0.0.1:8001","leader":"n1","term":3,"commit_index":120,"applied_index":119,"nodes":[{"id":"n1","raft_addr":"127.0.0.1:8001","http_addr":"127.0.0.1:7001","voter":true,"leader":true}]}`
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != want {
		t.Fatalf("GET /v1/cluster: %d %s", rec.Code, rec.Body)
	}

	rec = do(t, api, "POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"127.0.0.1:8002","http_addr":"127.0.0.1:7002"}`)
	if rec.Code != 200 || len(fake.joined) != 1 || fake.joined[0].ID != "n2" || fake.joined[0].RaftAddr != "127.0.0.1:8002" {
		t.Fatalf("join: %d %s, joined %+v", rec.Code, rec.Body, fake.joined)
	}
	if rec := do(t, api, "POST", "/v1/cluster/join", `{"id":"n3"}`); rec.Code != 400 || decodeBody(t, rec)["field"] != "raft_addr" {
		t.Fatalf("join without raft_addr: %d %s", rec.Code, rec.Body)
	}

	if rec := do(t, api, "DELETE", "/v1/cluster/nodes/n2", ""); rec.Code != 200 || fake.removed[0] != "n2" {
		t.Fatalf("remove: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, api, "DELETE", "/v1/cluster/nodes/ghost", ""); rec.Code != 404 || decodeBody(t, rec)["code"] != "not_found" {
		t.Fatalf("remove unknown: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, api, "POST", "/v1/cluster/nodes/n2", ""); rec.Code != 405 || rec.Header().Get("Allow") != "DELETE" {
		t.Fatalf("wrong method: %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
	if rec := do(t, api, "GET", "/v1/nothing", ""); rec.Code != 404 || decodeBody(t, rec)["code"] != "not_found" {
		t.Fatalf("unknown path: %d %s", rec.Code, rec.Body)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	fake := newFake()
	api := newTestAPI(fake)
	if rec := do(t, api, "GET", "/healthz", ""); rec.Code != 200 {
		t.Fatalf("healthz %d", rec.Code)
	}
	if rec := do(t, api, "GET", "/readyz", ""); rec.Code != 200 {
		t.Fatalf("readyz %d while ready", rec.Code)
	}
	fake.mu.Lock()
	fake.ready = false
	fake.mu.Unlock()
	if rec := do(t, api, "GET", "/readyz", ""); rec.Code != 503 {
		t.Fatalf("readyz %d while not ready", rec.Code)
	}
}
