package main

import (
	"context"
	"fmt"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/testcluster"
)

// coalescedTarget is single /v1/allow calls through a Go client with
// Options.Coalesce: one client per node, shared by the callers on that
// node, so concurrent calls go together as batches.
type coalescedTarget struct {
	env     *environment
	clients []*client.Client
}

func newCoalescedTarget(e *environment, nodes []*testcluster.Node) *coalescedTarget {
	t := &coalescedTarget{env: e}
	for _, n := range nodes {
		t.clients = append(t.clients, client.NewWithOptions(client.Options{HTTPClient: e.http, Coalesce: true}, n.URL()))
	}
	return t
}

func (t *coalescedTarget) name() string { return "client-coalesced" }

func (t *coalescedTarget) do(ctx context.Context, caller, seq int) (int, error) {
	limit := &client.Limit{Rate: benchLimit.Rate, Period: "1s", Burst: benchLimit.Burst}
	d, err := t.clients[caller%len(t.clients)].Allow(ctx, client.AllowRequest{Key: t.env.key(caller, seq), Limit: limit})
	if err != nil {
		return 0, err
	}
	if !d.Allowed {
		return 0, fmt.Errorf("denied")
	}
	return 1, nil
}
