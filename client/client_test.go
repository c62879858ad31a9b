package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/limitnode/limitnode/client"
)

func TestClientAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/allow":
			w.Header().Set("Retry-After", "3")
			w.Header().Set("X-Limitnode-Leader", "n1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"allowed":false,"limit":5,"remaining":0,"reset_after_ms":9000,"retry_after_ms":2100}`))
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"raft_addr is required","code":"invalid_argument","field":"raft_addr"}`))
		}
	}))
	defer srv.Close()
	// The first address refuses connections: the client moves on.
	c := client.New(nil, "127.0.0.1:1", srv.URL)
	ctx := context.Background()

	d, err := c.Allow(ctx, client.AllowRequest{Key: "k", Limit: &client.Limit{Rate: 5}})
	if err != nil {
		t.Fatal(err)
	}
	want := client.Decision{Allowed: false, Limit: 5, ResetAfterMS: 9000, RetryAfterMS: 2100, StatusCode: 429, RetryAfter: 3e9, Leader: "n1"}
	if got := d; got.Header.Get("Retry-After") != "3" || len(got.Body) == 0 {
		t.Fatalf("decision headers %v, body %q: want Retry-After 3 and the body as sent", got.Header, got.Body)
	}
	d.Header, d.Body = nil, nil
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("decision %+v, want %+v", d, want)
	}

	err = c.Join(ctx, client.Member{ID: "n2"})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "invalid_argument" || apiErr.Field != "raft_addr" {
		t.Fatalf("join error %#v", err)
	}
}

func TestClientWithNoReachableNode(t *testing.T) {
	t.Parallel()
	_, err := client.New(nil, "127.0.0.1:1").Cluster(context.Background())
	if !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
}
