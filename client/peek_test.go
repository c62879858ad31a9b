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

// TestAPeekWithACostIsRefused: a peek consumes nothing, so a request that
// says Peek and gives a cost is refused before it is sent (400, the field
// named), inline, among checks and as a settlement, and the key keeps its
// whole budget; the API's JSON has no peek of its own, so the cost would
// otherwise be consumed.
func TestAPeekWithACostIsRefused(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
	defer cancel()
	cl := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, c.WaitLeader().URL())
	limit := &client.Limit{Rate: 10, Period: time.Hour}
	for _, tc := range []struct {
		name, key, field string
		send             func(req client.AllowRequest) error
		req              client.AllowRequest
	}{
		{"inline", "k1", "cost", allow(ctx, cl), client.AllowRequest{Key: "k1", Limit: limit, Peek: true, Cost: 5}},
		{"a check", "k2", "checks[1].cost", allow(ctx, cl), client.AllowRequest{Checks: []client.Check{
			{Key: "other", Limit: limit, Peek: true}, {Key: "k2", Limit: limit, Peek: true, Cost: 5}}}},
		{"a settlement", "k3", "cost", func(req client.AllowRequest) error {
			_, err := cl.StartSettlement(ctx, req, time.Minute)
			return err
		}, client.AllowRequest{Key: "k3", Limit: limit, Peek: true, Cost: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var apiErr *client.Error
			if err := tc.send(tc.req); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Field != tc.field {
				t.Fatalf("a peek with cost 5: %v; want a 400 naming %s", err, tc.field)
			}
			d, err := cl.Allow(ctx, client.AllowRequest{Key: tc.key, Limit: limit, Peek: true})
			if err != nil || d.Remaining != 10 {
				t.Fatalf("after the refused peek, %s has %d left (%v); want all 10", tc.key, d.Remaining, err)
			}
		})
	}
}

func allow(ctx context.Context, cl *client.Client) func(client.AllowRequest) error {
	return func(req client.AllowRequest) error {
		_, err := cl.Allow(ctx, req)
		return err
	}
}
