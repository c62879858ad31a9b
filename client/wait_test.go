package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/testcluster"
)

// TestWaitSleepsOutAReservation takes a GCRA limit's burst; a Wait for one
// more within a millisecond is denied at once, and one within three seconds
// returns once the next unit is due (2 s after the burst), admitted, with
// nothing left to wait.
func TestWaitSleepsOutAReservation(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	cl := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, c.Followers()[0].URL())
	req := client.AllowRequest{Key: "paced", Limit: &client.Limit{Algorithm: "gcra", Rate: 1, Period: 2 * time.Second, Burst: 1}}
	start := time.Now() // before the burst: the next unit is due 2 s after it
	if d, err := cl.Allow(context.Background(), req); err != nil || !d.Allowed {
		t.Fatalf("the burst: %+v %v", d, err)
	}
	if d, err := cl.Wait(context.Background(), req, time.Millisecond); err != nil || d.Allowed {
		t.Fatalf("Wait beyond max_wait: %+v %v, want denied", d, err)
	}
	d, err := cl.Wait(context.Background(), req, 3*time.Second)
	if err != nil || !d.Allowed || d.Wait != 0 || time.Since(start) < 1990*time.Millisecond {
		t.Fatalf("Wait: %+v %v after %v; want admitted 2 s after the burst", d, err, time.Since(start))
	}
}
