package main

import (
	"context"
	"fmt"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/testcluster"
)

// clientTarget is single /v1/allow calls through the Go client, one
// client per node shared by the callers on that node: client with the
// defaults, client-coalesced with Options.Coalesce (concurrent calls go
// together as batches), client-shares with Options.LocalShares and local
// shares on the limit (a hot key is answered in process).
type clientTarget struct {
	env     *environment
	label   string
	clients []*client.Client
	shares  *client.LocalShares
}

func newClientTarget(e *environment, label string, nodes []*testcluster.Node) *clientTarget {
	t := &clientTarget{env: e, label: label}
	opts := client.Options{HTTPClient: e.http, Coalesce: label == "client-coalesced", LocalShares: label == "client-shares"}
	if opts.LocalShares {
		t.shares = &client.LocalShares{}
	}
	for _, n := range nodes {
		t.clients = append(t.clients, client.NewWithOptions(opts, n.URL()))
	}
	return t
}

func (t *clientTarget) name() string { return t.label }

func (t *clientTarget) do(ctx context.Context, caller, seq int) (int, error) {
	limit := &client.Limit{Rate: benchLimit.Rate, Period: "1s", Burst: benchLimit.Burst, LocalShares: t.shares}
	d, err := t.clients[caller%len(t.clients)].Allow(ctx, client.AllowRequest{Key: t.env.key(caller, seq), Limit: limit})
	if err != nil {
		return 0, err
	}
	if !d.Allowed {
		return 0, fmt.Errorf("denied")
	}
	return 1, nil
}
