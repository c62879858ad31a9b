package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
)

// TestAFloodOfIDsLeavesAnothersRetryADuplicate: the request-ID memory was
// one first-in-first-out list shared by every caller, so another token
// that sent a million IDs pushed out a payment's ID, and the payment's
// retry within the documented five minutes was charged again. Now each
// token holds at most -max-request-ids-per-caller IDs: the flooder is
// refused new ones (503, naming request_id) and the payment's retry is
// still a duplicate, charged once.
func TestAFloodOfIDsLeavesAnothersRetryADuplicate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	payerToken, payerEntry := newToken(t, "payer", "decide")
	flooderToken, flooderEntry := newToken(t, "flooder", "decide")
	tokens := filepath.Join(dir, "tokens.json")
	writeTokenFile(t, tokens, payerEntry, flooderEntry)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"),
		"-auth", tokens, "-max-request-ids-per-caller", "100"}, nil)
	payer := client.NewWithOptions(client.Options{Token: payerToken}, n.addr)
	flooder := client.NewWithOptions(client.Options{Token: flooderToken}, n.addr)
	limit := &client.Limit{Algorithm: "sliding_window_log", Rate: 1000, Period: time.Hour} // nothing comes back while the test runs

	payment := client.AllowRequest{Key: "payments", Limit: limit, RequestID: "payment-42"}
	if d, err := payer.Allow(ctx, payment); err != nil || !d.Allowed || d.Duplicate {
		t.Fatalf("the payment: %+v, %v", d, err)
	}
	taken, refused := 0, 0
	for i := range 150 {
		d, err := flooder.Allow(ctx, client.AllowRequest{Key: "flood", Limit: limit, RequestID: fmt.Sprintf("flood-%d", i)})
		var apiErr *client.Error
		switch {
		case err == nil && d.Allowed:
			taken++
		case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusServiceUnavailable && apiErr.Field == "request_id":
			refused++
		default:
			t.Fatalf("flood request %d: %+v, %v", i, d, err)
		}
	}
	if taken != 100 || refused != 50 {
		t.Fatalf("the flooder had %d IDs taken and %d refused, want 100 and 50", taken, refused)
	}
	if d, err := payer.Allow(ctx, payment); err != nil || !d.Allowed || !d.Duplicate {
		t.Fatalf("the payment's retry after the flood: %+v, %v; want the first answer, a duplicate", d, err)
	}
	if d, err := payer.Allow(ctx, client.AllowRequest{Key: "payments", Limit: limit, Peek: true}); err != nil || d.Remaining != 999 {
		t.Fatalf("the payments key: %+v, %v; want it charged once", d, err)
	}
}
