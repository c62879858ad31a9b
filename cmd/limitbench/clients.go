package main

import (
	"context"
	"fmt"
	"time"

	"github.com/limitnode/limitnode/client"
)

// clientTarget is single /v1/allow calls through the Go client, one
// client per node shared by the callers on that node: client with the
// defaults, client-coalesced with Options.Coalesce (concurrent calls go
// together as batches), client-shares with Options.LocalShares and local
// shares on the limit (a hot key is answered in process).
type clientTarget struct {
	env     *environment
	label   string
	cluster netCluster
	clients []*client.Client
	shares  *client.LocalShares
}

// newClientTarget makes one client per URL, each a node of c.
func newClientTarget(e *environment, label string, c netCluster, urls []string) *clientTarget {
	t := &clientTarget{env: e, label: label, cluster: c}
	opts := client.Options{HTTPClient: e.http, Coalesce: label == "client-coalesced", LocalShares: label == "client-shares"}
	if opts.LocalShares {
		t.shares = &client.LocalShares{}
	}
	for _, u := range urls {
		t.clients = append(t.clients, client.NewWithOptions(opts, u))
	}
	return t
}

func (t *clientTarget) name() string { return t.label }

func (t *clientTarget) servers() []serverProcess { return t.cluster.servers() }

func (t *clientTarget) metricsNodes() []metricsNode { return metricsNodesOf(t.cluster) }

func (t *clientTarget) where() string { return t.cluster.where() }

func (t *clientTarget) do(ctx context.Context, caller, seq int) (int, error) {
	limit := &client.Limit{Rate: benchLimit.Rate, Period: time.Second, Burst: benchLimit.Burst, LocalShares: t.shares}
	d, err := t.clients[caller%len(t.clients)].Allow(ctx, client.AllowRequest{Key: t.env.key(caller, seq), Limit: limit})
	if err != nil {
		return 0, err
	}
	if !d.Allowed {
		return 0, fmt.Errorf("denied")
	}
	return 1, nil
}
