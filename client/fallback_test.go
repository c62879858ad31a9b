package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
)

// flakyServer answers like a node, or with a 503 while down is set.
func flakyServer(t *testing.T, down *atomic.Bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case down.Load():
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"no leader could be reached in time; retry","code":"unavailable"}`))
		case readBody(r) == `{"key":"k","limit":{"rate":0}}`:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"rate must be an integer","code":"invalid_argument","field":"limit.rate"}`))
		default:
			_, _ = w.Write([]byte(`{"allowed":true,"limit":10,"remaining":9,"reset_after_ms":100,"retry_after_ms":0}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func readBody(r *http.Request) string {
	data, _ := io.ReadAll(r.Body)
	return string(data)
}

func TestGuardFailurePolicies(t *testing.T) {
	t.Parallel()
	req := client.AllowRequest{Key: "k", Limit: &client.Limit{Rate: 10, Period: time.Minute}}
	tests := []struct {
		name        string
		policy      client.FailurePolicy
		wantAllowed []bool // answers to successive requests while the cluster is down
	}{
		{"fail closed denies", client.FailClosed, []bool{false, false}},
		{"fail open allows", client.FailOpen, []bool{true, true, true}},
		// 10 a minute shared by 2 replicas: 5 here, then denied.
		{"a local limiter enforces this replica's share", client.FailLocal, []bool{true, true, true, true, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var down atomic.Bool
			srv := flakyServer(t, &down)
			now := time.Unix(1_800_000_000, 0)
			g := client.NewGuard(client.New(nil, srv.URL), client.GuardOptions{OnFailure: tt.policy, Replicas: 2, Clock: func() time.Time { return now }})
			ctx := context.Background()
			d, err := g.Allow(ctx, req)
			if err != nil || d.Degraded || !d.Allowed || d.Remaining != 9 {
				t.Fatalf("while up: %+v, %v", d, err)
			}
			down.Store(true)
			for i, want := range tt.wantAllowed {
				d, err := g.Allow(ctx, req)
				if err != nil || !d.Degraded || d.Cause == nil || d.Allowed != want {
					t.Fatalf("request %d while down: %+v, %v; want allowed=%v", i, d, err, want)
				}
			}
		})
	}
}

func TestGuardDoesNotHideBadRequests(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	srv := flakyServer(t, &down)
	g := client.NewGuard(client.New(nil, srv.URL), client.GuardOptions{OnFailure: client.FailOpen})
	_, err := g.Allow(context.Background(), client.AllowRequest{Key: "k", Limit: &client.Limit{Rate: 0}})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Field != "limit.rate" {
		t.Fatalf("a 400 answered %v, want the API's error", err)
	}
}

func TestGuardWhenNoNodeAnswers(t *testing.T) {
	t.Parallel()
	g := client.NewGuard(client.New(nil, "127.0.0.1:1"), client.GuardOptions{OnFailure: client.FailLocal})
	d, err := g.Allow(context.Background(), client.AllowRequest{Key: "k", Policy: "only-the-cluster-knows"})
	if err != nil || !d.Degraded || d.Allowed || !errors.Is(d.Cause, client.ErrUnreachable) {
		t.Fatalf("a policy request with no node: %+v, %v; want a degraded denial", d, err)
	}
}

// TestLocalFallbackRefusesWhatTheClusterWould: with the cluster unreachable,
// FailLocal refuses an invalid request as the API would (a 400 naming the
// field), rather than admitting it.
func TestLocalFallbackRefusesWhatTheClusterWould(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	srv := flakyServer(t, &down)
	g := client.NewGuard(client.New(nil, srv.URL), client.GuardOptions{OnFailure: client.FailLocal})
	cost := int64(11)
	tests := []struct {
		name      string
		req       client.AllowRequest
		wantField string
	}{
		{"rate 0", client.AllowRequest{Key: "k", Limit: &client.Limit{Rate: 0}}, "limit.rate"},
		{"no key", client.AllowRequest{Limit: &client.Limit{Rate: 10}}, "key"},
		{"a cost over the burst", client.AllowRequest{Key: "k", Limit: &client.Limit{Rate: 10}, Cost: cost}, "cost"},
		{"a bad period in the second check", client.AllowRequest{Checks: []client.Check{{Key: "a", Limit: &client.Limit{Rate: 1}}, {Key: "b", Limit: &client.Limit{Rate: 1, Period: -time.Second}}}}, "checks[1].limit.period"},
	}
	for _, tt := range tests {
		d, err := g.Allow(context.Background(), tt.req)
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Field != tt.wantField || d.Allowed {
			t.Errorf("%s: %+v, %v; want a 400 on %q", tt.name, d, err, tt.wantField)
		}
	}
}
