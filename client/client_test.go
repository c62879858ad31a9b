package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
)

func TestClientAnswers(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/allow":
			w.Header().Set("Retry-After", "3")
			w.Header().Set("RateLimit-Remaining", "0")
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

	before := time.Now()
	d, err := c.Allow(ctx, client.AllowRequest{Key: "k", Limit: &client.Limit{Rate: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if d.ResetAt.Before(before.Add(9*time.Second)) || d.ResetAt.After(time.Now().Add(9*time.Second)) {
		t.Fatalf("ResetAt %v, want the answer's arrival plus reset_after_ms (9 s after %v)", d.ResetAt, before)
	}
	d.ResetAt = time.Time{}
	want := client.Decision{Allowed: false, Limit: 5, ResetAfter: 9 * time.Second, ExactRetryAfter: 2100 * time.Millisecond, StatusCode: 429, RetryAfter: 3e9, Leader: "n1"}
	if got := d; got.Header.Get("Retry-After") != "3" || got.Header.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("decision headers %v: want Retry-After 3 and RateLimit-Remaining 0", got.Header)
	}
	d.Header = nil
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

// TestRestoreSentAgainToTheLeaderIsWhole: a follower answers a restore with
// a redirect before it has read the body; the file sent to the leader must
// still arrive whole, though the first attempt's transport may still be
// reading its copy.
func TestRestoreSentAgainToTheLeaderIsWhole(t *testing.T) {
	t.Parallel()
	file := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, err := io.ReadAll(r.Body)
		if err != nil || !bytes.Equal(got, file) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"got %d bytes (%v), want %d","code":"invalid_argument"}`, len(got), err, len(file))
			return
		}
		_, _ = io.WriteString(w, `{"backup_index":7,"restored_index":12,"limits_digest":"ab"}`)
	}))
	defer leader.Close()
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", leader.URL+"/v1/snapshot")
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	defer follower.Close()
	c := client.New(nil, follower.URL)
	for i := range 5 {
		if _, err := c.Restore(context.Background(), bytes.NewReader(file), int64(len(file))); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
}
