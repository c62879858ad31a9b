package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/testcluster"
)

// TestWaitSleepsOutAReservation takes a GCRA limit's burst, then Waits for
// one more within a second: it returns after about one emission interval,
// admitted, with nothing left to wait; one beyond max_wait is denied at
// once.
func TestWaitSleepsOutAReservation(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	cl := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, c.Followers()[0].URL())
	req := client.AllowRequest{Key: "paced", Limit: &client.Limit{Algorithm: "gcra", Rate: 5, Period: "1s", Burst: 1}}
	start := time.Now() // before the burst: the reservation ends 200 ms after it
	if d, err := cl.Allow(context.Background(), req); err != nil || !d.Allowed {
		t.Fatalf("the burst: %+v %v", d, err)
	}
	d, err := cl.Wait(context.Background(), req, time.Second)
	if err != nil || !d.Allowed || d.WaitMS != 0 || time.Since(start) < 190*time.Millisecond {
		t.Fatalf("Wait: %+v %v after %v; want admitted after about 200 ms", d, err, time.Since(start))
	}
	d, err = cl.Wait(context.Background(), req, time.Millisecond)
	if err != nil || d.Allowed {
		t.Fatalf("Wait beyond max_wait: %+v %v, want denied", d, err)
	}
}
