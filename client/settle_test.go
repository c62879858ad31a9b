package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
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
	if _, err := cl.PutPolicy(ctx, "tokens", client.Policy{Limit: &client.Limit{Rate: 3600, Period: time.Hour, Burst: 1000}, MaxDebt: 100}); err != nil {
		t.Fatal(err)
	}
	ask := func(key string, n int64) client.AllowRequest {
		return client.AllowRequest{Policy: "tokens", Key: key, Cost: n}
	}
	// left is what key has on node n (a unit refills every second).
	left := func(n *testcluster.Node, key string) int64 {
		peek := ask(key, 0)
		peek.Peek = true
		d, err := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, n.URL()).Allow(ctx, peek)
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}

	res, err := cl.StartSettlement(ctx, ask("acme", 500), time.Minute)
	if err != nil || !res.Allowed || res.SettlementID == "" {
		t.Fatalf("the reservation: %+v %v", res, err)
	}
	// Duplicate may be true even here: a loaded machine can make the
	// client send the settlement again, and the repeat is answered with
	// the first answer, charged once.
	s, err := res.Settle(ctx, 120)
	if err != nil || s.Refunded != 380 || s.Charged != 0 {
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

	// In a batch, through HTTP: each request its own reservation; the
	// settlement says when it took effect.
	resp, err := testcluster.HTTPClient().Post(c.Nodes[2].URL()+"/v1/allow/batch", "application/json",
		strings.NewReader(`{"requests":[{"policy":"tokens","key":"batch","cost":50,"settle":{"ttl":"1m"}},{"policy":"tokens","key":"batch","cost":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var batch struct {
		Responses []struct {
			SettlementID string `json:"settlement_id"`
		} `json:"responses"`
	}
	err = json.NewDecoder(resp.Body).Decode(&batch)
	resp.Body.Close()
	if err != nil || len(batch.Responses) != 2 || batch.Responses[0].SettlementID == "" || batch.Responses[1].SettlementID != "" {
		t.Fatalf("a batch with one reservation: %+v %v", batch, err)
	}
	resp, err = testcluster.HTTPClient().Post(c.Nodes[1].URL()+"/v1/settle", "application/json",
		strings.NewReader(`{"settlement_id":"`+batch.Responses[0].SettlementID+`","cost":10}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if at, err := strconv.ParseInt(resp.Header.Get("X-Limitnode-Decided-At"), 10, 64); resp.StatusCode != http.StatusOK || err != nil || at <= 0 {
		t.Fatalf("the batch's settlement: %d, decided at %q", resp.StatusCode, resp.Header.Get("X-Limitnode-Decided-At"))
	}
	if got := left(c.Nodes[0], "batch"); got < 1000-10-1 || got > 1000-10-1+20 {
		t.Fatalf("%d left after the batch's settlement, want 989 and what refilled since", got)
	}

	// More than reserved: charged into debt, at most max_debt beyond empty.
	res, err = cl.StartSettlement(ctx, ask("bob", 900), time.Minute)
	if err != nil || !res.Allowed {
		t.Fatalf("the second reservation: %+v %v", res, err)
	}
	s, err = res.Settle(ctx, 1300)
	if err != nil || s.Charged < 200 || s.Charged > 220 || s.Charged+s.Forgiven != 400 || s.RetryAfter < 99*time.Second {
		t.Fatalf("settled with 1300 of 900: %+v %v, want about 100 left and 100 of debt charged, the rest forgiven", s, err)
	}
	d, err := cl.Allow(ctx, ask("bob", 1))
	if err != nil || d.Allowed || d.StatusCode != http.StatusTooManyRequests || d.RetryAfter < 90*time.Second {
		t.Fatalf("a request of a key in debt: %+v %v, want 429 with a Retry-After of about 100 s", d, err)
	}

	// Too late: a reservation of a second, settled after it ended.
	res, err = cl.StartSettlement(ctx, ask("late", 300), time.Second)
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
