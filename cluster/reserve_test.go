package cluster_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/testcluster"
)

// TestReservationsThroughAFollower asks for more than a GCRA limit's burst
// at once through a follower with max_wait: the burst passes without a
// wait, the next ones are admitted with waits growing by the emission
// interval, never beyond max_wait, and the rest are denied; a multi-check
// request reserves on every check or on none.
func TestReservationsThroughAFollower(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	node := c.Followers()[0].Node()
	ctx := context.Background()
	// One a second, two at once, up to 5 s of reservations: calls a few
	// milliseconds apart see the waits grow a second at a time.
	steady := algorithms.Limit{Algorithm: algorithms.GCRA, Rate: 1, Period: time.Second, Burst: 2}
	maxWait := int64(5 * time.Second)
	start := time.Now()
	var waits []time.Duration
	denied := 0
	for range 20 {
		d, err := node.Allow(ctx, contract.Request{Checks: []contract.Check{{Key: "smooth", Limit: steady, Cost: 1}}, MaxWait: time.Duration(maxWait)})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			denied++
			continue
		}
		w := d.Checks[0].Wait
		if int64(w) > maxWait || (w > 0 && d.Checks[0].Remaining != 0) {
			t.Fatalf("a wait of %v beyond max_wait, or %d remaining while in debt", time.Duration(w), d.Checks[0].Remaining)
		}
		waits = append(waits, w)
	}
	elapsed := time.Since(start)
	bound := steady.Burst + int64(float64(steady.Rate)*(elapsed.Seconds()+time.Duration(maxWait).Seconds())) + 1
	if int64(len(waits)) > bound || denied == 0 {
		t.Fatalf("%d admitted (bound %d over %v), %d denied", len(waits), bound, elapsed, denied)
	}
	if waits[0] != 0 || waits[1] != 0 || waits[2] == 0 {
		t.Fatalf("waits %v: the burst of 2 goes at once, the third waits", waits)
	}
	for i := 3; i < len(waits); i++ {
		if waits[i] < waits[i-1] {
			t.Fatalf("waits %v do not grow", waits)
		}
	}

	hourly := algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 1, Period: time.Hour, Burst: 1}
	pair := func(wait int64) contract.Request {
		return contract.Request{MaxWait: time.Duration(wait), Checks: []contract.Check{
			{Key: "pair-fast", Limit: algorithms.Limit{Algorithm: algorithms.GCRA, Rate: 1, Period: time.Second, Burst: 1}, Cost: 1},
			{Key: "pair-slow", Limit: hourly, Cost: 1},
		}}
	}
	if d, err := node.Allow(ctx, pair(0)); err != nil || !d.Allowed {
		t.Fatalf("the first pair: %+v %v", d, err)
	}
	if d, err := node.Allow(ctx, pair(int64(2*time.Second))); err != nil || d.Allowed {
		t.Fatalf("the second pair, whose slow check needs an hour: %+v %v, want denied", d, err)
	}
	d, err := node.Allow(ctx, contract.Request{MaxWait: 2 * time.Second, Checks: pair(0).Checks[:1]})
	if err != nil || !d.Allowed || int64(d.Checks[0].Wait) > int64(time.Second) {
		t.Fatalf("the fast check alone after the denied pair: %+v %v; want one wait of at most 1 s (the pair reserved nothing)", d, err)
	}
	if _, err := node.Allow(ctx, contract.Request{MaxWait: time.Duration(maxWait), Checks: []contract.Check{
		{Key: "window", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 1, Period: time.Second}, Cost: 1}}}); contract.As(err) == nil || contract.As(err).Field != "max_wait" || strings.Contains(err.Error(), "checks[") {
		t.Fatalf("max_wait on a window: %v, want a refusal naming max_wait and no check of a one-check request", err)
	}
}

// TestHoldWaitsOutTheReservation asks over HTTP, through a follower, with
// hold: the node answers 200 only after the reservation's wait, says how
// long it held, leaves no wait to the caller, and counts the reset from the
// answer, not from the decision.
func TestHoldWaitsOutTheReservation(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	url := c.Followers()[0].URL() + "/v1/allow"
	body := `{"key":"held","limit":{"algorithm":"leaky_bucket","rate":1,"period":"2s","burst":1},"max_wait":"3s","hold":true}`
	if a := decided(t, url, body); a.status != http.StatusOK {
		t.Fatalf("the first: %d", a.status)
	}
	start := time.Now()
	resp, err := httpClient.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		Allowed bool  `json:"allowed"`
		WaitMS  int64 `json:"wait_ms"`
		HeldMS  int64 `json:"held_ms"`
		ResetMS int64 `json:"reset_after_ms"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK || !out.Allowed || out.WaitMS != 0 || out.HeldMS <= 0 || out.HeldMS > 2000 {
		t.Fatalf("the held one: %d %s", resp.StatusCode, data)
	}
	if took < time.Duration(out.HeldMS-1)*time.Millisecond {
		t.Fatalf("answered after %v, but says it held %d ms", took, out.HeldMS)
	}
	// Decided, the bucket was full again in up to 4s (two drips); answered
	// after the hold, that is 4s less the hold.
	if out.ResetMS+out.HeldMS > 4000 || resp.Header.Get("RateLimit-Reset") == "4" {
		t.Fatalf("reset_after_ms %d after holding %d ms (RateLimit-Reset %s): the reset was not counted from the answer", out.ResetMS, out.HeldMS, resp.Header.Get("RateLimit-Reset"))
	}
}
