package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/testcluster"
)

// countingTransport counts the HTTP calls it carries.
type countingTransport struct {
	next  http.RoundTripper
	calls atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return c.next.RoundTrip(r)
}

// TestCoalescedCallsShareHTTPCalls sends 64 concurrent Allow calls through
// one coalescing client: fewer HTTP calls than requests carry them, exactly
// the limit is admitted, the denied get a 429 decision with Retry-After,
// and a bad request among them gets its own error naming its field.
func TestCoalescedCallsShareHTTPCalls(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	transport := &countingTransport{next: testcluster.HTTPClient().Transport}
	cl := client.NewWithOptions(client.Options{HTTPClient: &http.Client{Transport: transport}, Coalesce: true}, c.Followers()[0].URL())
	const callers, limit = 64, 40
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			// A request ID makes a retry after an unknown outcome (a change
			// of leader on a loaded machine) charge once.
			req := client.AllowRequest{Key: "coalesced", Limit: &client.Limit{Rate: limit, Period: time.Hour, Algorithm: "fixed_window"},
				RequestID: fmt.Sprintf("coalesced-%d", i)}
			if i == 7 {
				req.Limit = &client.Limit{Rate: 0} // refused on its own
			}
			d, err := cl.Allow(context.Background(), req)
			var apiErr *client.Error
			for deadline := time.Now().Add(testcluster.WaitTimeout); errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusServiceUnavailable && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
				d, err = cl.Allow(context.Background(), req)
			}
			switch {
			case i == 7:
				if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Field != "limit.rate" {
					t.Errorf("the bad request: %v, want a 400 naming limit.rate", err)
				}
			case err != nil:
				t.Errorf("caller %d: %v", i, err)
			case d.Allowed:
				allowed.Add(1)
			case d.StatusCode == http.StatusTooManyRequests && d.RetryAfter > 0 && d.Header.Get("Retry-After") != "":
				denied.Add(1)
			default:
				t.Errorf("caller %d: a denial without its 429 and Retry-After: %+v", i, d)
			}
		})
	}
	close(start)
	wg.Wait()
	if allowed.Load() != limit || denied.Load() != callers-1-limit {
		t.Fatalf("%d allowed, %d denied; want %d and %d", allowed.Load(), denied.Load(), limit, callers-1-limit)
	}
	if calls := transport.calls.Load(); calls >= callers {
		t.Fatalf("%d HTTP calls for %d concurrent requests: nothing was coalesced", calls, callers)
	} else {
		t.Logf("%d requests in %d HTTP calls", callers, calls)
	}
}
