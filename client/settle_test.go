package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/testcluster"
)

// TestReserveThenSettleOnACluster runs the whole pattern through a
// follower, as the Go helper does it: a reservation settled with less gives
// the rest back (on every node), settled again is the first answer, with
// another cost is refused; one settled with more is charged into debt up to
// max_debt and the key is denied until it is repaid, Retry-After saying
// when; one settled after its TTL is refused and stays charged in full.
func TestReserveThenSettleOnACluster(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
	defer cancel()
	cl := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, c.Followers()[0].URL())
	if _, err := cl.PutPolicy(ctx, "tokens", client.Policy{Limit: &client.Limit{Rate: 3600, Period: "1h", Burst: 1000}, MaxDebt: 100}); err != nil {
		t.Fatal(err)
	}
	cost := func(n int64) *int64 { return &n }
	ask := func(key string, n int64) client.AllowRequest {
		return client.AllowRequest{Policy: "tokens", Key: key, Cost: cost(n)}
	}
	// left is what key has on node n (a unit refills every second).
	left := func(n *testcluster.Node, key string) int64 {
		d, err := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, n.URL()).Allow(ctx, ask(key, 0))
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}

	res, err := cl.Reserve(ctx, ask("acme", 500), time.Minute)
	if err != nil || !res.Allowed || res.SettlementID == "" {
		t.Fatalf("the reservation: %+v %v", res, err)
	}
	s, err := res.Settle(ctx, 120)
	if err != nil || s.Refunded != 380 || s.Charged != 0 || s.Duplicate {
		t.Fatalf("settled with 120 of 500: %+v %v", s, err)
	}
	for _, n := range c.Nodes {
		if got := left(n, "acme"); got < 880 || got > 900 {
			t.Fatalf("%s: %d left after the refund, want 880 and what refilled since", n.ID, got)
		}
	}
	if again, err := res.Settle(ctx, 120); err != nil || !again.Duplicate || again.Refunded != 380 {
		t.Fatalf("settled twice: %+v %v, want the first answer", again, err)
	}
	var apiErr *client.Error
	if _, err := res.Settle(ctx, 130); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.Field != "settlement_id" {
		t.Fatalf("settled again with another cost: %v", err)
	}
	if _, err := cl.Settle(ctx, "s0.0", 1); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Field != "settlement_id" {
		t.Fatalf("settled an unknown reservation: %v", err)
	}

	// More than reserved: charged into debt, at most max_debt beyond empty.
	res, err = cl.Reserve(ctx, ask("bob", 900), time.Minute)
	if err != nil || !res.Allowed {
		t.Fatalf("the second reservation: %+v %v", res, err)
	}
	s, err = res.Settle(ctx, 1300)
	if err != nil || s.Charged < 200 || s.Charged > 220 || s.Charged+s.Forgiven != 400 || s.RetryAfterMS < 99_000 {
		t.Fatalf("settled with 1300 of 900: %+v %v, want about 100 left and 100 of debt charged, the rest forgiven", s, err)
	}
	d, err := cl.Allow(ctx, ask("bob", 1))
	if err != nil || d.Allowed || d.StatusCode != http.StatusTooManyRequests || d.RetryAfter < 90*time.Second {
		t.Fatalf("a request of a key in debt: %+v %v, want 429 with a Retry-After of about 100 s", d, err)
	}

	// Too late: a reservation of a second, settled after it ended.
	res, err = cl.Reserve(ctx, ask("late", 300), time.Second)
	if err != nil || !res.Allowed {
		t.Fatalf("the short reservation: %+v %v", res, err)
	}
	time.Sleep(1500 * time.Millisecond) // the reservation's TTL, in cluster time, and then some
	before := left(c.Nodes[0], "late")
	if _, err := res.Settle(ctx, 0); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Field != "settlement_id" {
		t.Fatalf("a late settlement: %v", err)
	}
	if after := left(c.Nodes[0], "late"); after > before+1 || after > 700+5 {
		t.Fatalf("%d left after the late settlement (%d before): the reservation was not charged in full", after, before)
	}
}
