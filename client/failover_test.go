package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/testcluster"
)

// mustHungListener listens on 127.0.0.1 and accepts connections that it
// never reads from nor answers, as the kernel does for a node stopped with
// SIGSTOP. It returns the listener's URL and how many connections it took.
func mustHungListener(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
}

// TestAHungNodeCostsAnAttemptNotTheCall lists a node that accepts and never
// answers before two healthy ones, and asks five times through a Guard that
// fails closed, each call with the middleware's 2 s: every call is decided
// by the cluster (the first after a third of its time on the hung node, the
// next ones at once, on the node that answered), each charged once. A lease
// acquire, which could take a second slot if sent again, is not moved on.
func TestAHungNodeCostsAnAttemptNotTheCall(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	hung, accepted := mustHungListener(t)
	cl := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, hung, c.Nodes[1].URL(), c.Nodes[2].URL())
	guard := client.NewGuard(cl, client.GuardOptions{OnFailure: client.FailClosed})
	req := client.AllowRequest{Key: "behind-a-hung-node", Limit: &client.Limit{Rate: 10, Period: time.Hour}}
	asked := 0 // connections the hung node accepted by the end of the first call
	for i := range 5 {
		// Each call has a request ID, so that one a loaded machine's
		// cluster did not answer in time is asked again, charged once.
		req.RequestID = fmt.Sprint("call-", i)
		var d client.GuardDecision
		var err error
		var took time.Duration
		for attempt := 0; attempt < 5; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			start := time.Now()
			d, err = guard.Allow(ctx, req)
			if attempt == 0 {
				took = time.Since(start)
			}
			cancel()
			if err != nil || !d.Degraded {
				break
			}
			t.Logf("call %d, attempt %d: not answered in time (%v); again", i+1, attempt+1, d.Cause)
		}
		if err != nil || d.Degraded || !d.Allowed || d.Remaining != int64(9-i) {
			t.Fatalf("call %d: %+v %v; want admitted by the cluster with %d left", i+1, d, err, 9-i)
		}
		if i == 0 {
			if took < 600*time.Millisecond {
				t.Fatalf("the first call took %v: it never waited for the hung node", took)
			}
			asked = accepted()
		} else if accepted() != asked {
			t.Fatalf("call %d: the hung node accepted %d connections, %d by the first call: the client went back to it", i+1, accepted(), asked)
		}
	}
	if accepted() == 0 {
		t.Fatal("the hung node was never asked")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	first := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, hung, c.Nodes[1].URL())
	if lease, err := first.AcquireLease(ctx, client.LeaseRequest{Key: "hung-lease", Max: 1, TTL: time.Minute}); err == nil {
		t.Fatalf("a lease acquire went on past the hung node: %+v", lease)
	}
	other := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, c.Nodes[1].URL())
	lease, err := other.AcquireLease(context.Background(), client.LeaseRequest{Key: "hung-lease", Max: 1, TTL: time.Minute})
	if err != nil || !lease.Granted || lease.Active != 1 {
		t.Fatalf("the lease's only slot after the acquire sent to the hung node: %+v %v", lease, err)
	}
}

// TestAMalformedAnswerIsTheFailurePolicys: an answer that is not a decision
// (not JSON, null, a field missing, of another type or negative, "allowed"
// against the status, over MaxAnswerBytes) is answered by the Guard's
// FailurePolicy, with ErrMalformedAnswer as the cause; so is a redirect,
// which the client does not follow.
func TestAMalformedAnswerIsTheFailurePolicys(t *testing.T) {
	t.Parallel()
	const fields = `"limit":5,"remaining":4,"reset_after_ms":100,"retry_after_ms":0`
	padded := `{"allowed":true,` + fields + `}` + strings.Repeat(" ", client.MaxAnswerBytes)
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		body   string
	}{
		{"a body that is not JSON", 200, nil, `<html>not a decision</html>`},
		{"null", 200, nil, `null`},
		{"an empty object", 200, nil, `{}`},
		{"allowed as a string", 200, nil, `{"allowed":"false",` + fields + `}`},
		{"allowed as a number", 200, nil, `{"allowed":1,` + fields + `}`},
		{"a number as a string", 200, nil, `{"allowed":true,"limit":"5","remaining":4,"reset_after_ms":100,"retry_after_ms":0}`},
		{"a negative wait", 200, nil, `{"allowed":true,` + fields + `,"wait_ms":-1000}`},
		{"a denial with status 200", 200, nil, `{"allowed":false,` + fields + `}`},
		{"an admission with status 429", 429, nil, `{"allowed":true,` + fields + `}`},
		{"a decision over MaxAnswerBytes", 200, nil, padded},
		{"a declared length over MaxAnswerBytes", 200, http.Header{"Content-Length": {"3000000000"}}, `{"allowed":true,`},
		{"a redirect", 302, http.Header{"Location": {"/elsewhere"}}, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header()[k] = v
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			guard := client.NewGuard(client.New(nil, srv.URL), client.GuardOptions{OnFailure: client.FailOpen})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d, err := guard.Allow(ctx, client.AllowRequest{Key: "k", Limit: &client.Limit{Rate: 5}})
			if err != nil || !d.Degraded || !d.Allowed {
				t.Fatalf("%+v %v: want the failure policy's admission", d, err)
			}
			if tc.status == 200 && !errors.Is(d.Cause, client.ErrMalformedAnswer) {
				t.Fatalf("cause %v, want ErrMalformedAnswer", d.Cause)
			}
		})
	}
}

// TestRetryAfterIsReadAsSecondsAndClamped: a 429's Retry-After is whole
// seconds, at most MaxRetryAfter; anything else reads as none.
func TestRetryAfterIsReadAsSecondsAndClamped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"3", 3 * time.Second},
		{"86400", client.MaxRetryAfter},
		{"86401", client.MaxRetryAfter},
		{"100000000", client.MaxRetryAfter},
		{"99999999999999999999", client.MaxRetryAfter},
		{"-5", 0},
		{"1.5", 0},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0},
	} {
		t.Run(tc.header, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", tc.header)
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprint(w, `{"allowed":false,"limit":5,"remaining":0,"reset_after_ms":100,"retry_after_ms":3000}`)
			}))
			defer srv.Close()
			d, err := client.New(nil, srv.URL).Allow(context.Background(), client.AllowRequest{Key: "k", Limit: &client.Limit{Rate: 5}})
			if err != nil || d.Allowed || d.RetryAfter != tc.want {
				t.Fatalf("%+v %v: RetryAfter %v, want %v", d, err, d.RetryAfter, tc.want)
			}
		})
	}
}
