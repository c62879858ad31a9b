package client_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/testcluster"
)

// sharingClient is a client with local shares, talking to every node.
func sharingClient(c *testcluster.Cluster) *client.Client {
	var urls []string
	for _, n := range c.Nodes {
		urls = append(urls, n.URL())
	}
	return client.NewWithOptions(client.Options{HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: testcluster.HTTPClient().Transport}, LocalShares: true}, urls...)
}

// TestClientsAnswerHotKeysFromShares: three clients with local shares
// spend one key at once, three times its budget between them: most
// admissions come from their shares, all of them together admit no more
// than the limit, and what a client did not spend is the key's again once
// it closes.
func TestClientsAnswerHotKeysFromShares(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitConverged()
	req := client.AllowRequest{Key: "client-hot", Limit: &client.Limit{Rate: 1, Period: time.Hour, Burst: 600, LocalShares: &client.LocalShares{TTL: time.Second}}}
	var admitted, shared atomic.Int64
	clients := []*client.Client{sharingClient(c), sharingClient(c), sharingClient(c)}
	var wg sync.WaitGroup
	for _, cl := range clients {
		for range 4 {
			wg.Go(func() {
				for range 150 {
					d, err := cl.Allow(context.Background(), req)
					if err != nil {
						continue // a loaded machine: not acknowledged as admitted
					}
					if d.Allowed {
						admitted.Add(1)
					}
					if d.Shared {
						shared.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if admitted.Load() > 600 || shared.Load() == 0 {
		t.Fatalf("%d admitted (at most 600), %d from shares (want some)", admitted.Load(), shared.Load())
	}
	t.Logf("%d admitted, %d from shares", admitted.Load(), shared.Load())

	// One client left with a share in hand gives it back as it closes.
	lone := sharingClient(c)
	key := client.AllowRequest{Key: "client-returned", Limit: &client.Limit{Rate: 1, Period: time.Hour, Burst: 1000, LocalShares: &client.LocalShares{TTL: time.Second}}}
	spent := int64(0)
	for got := false; !got; spent++ {
		d, err := lone.Allow(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		got = d.Shared
	}
	if err := lone.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	key.Peek = true
	d, err := client.New(&http.Client{Transport: testcluster.HTTPClient().Transport}, c.Nodes[0].URL()).Allow(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 1000-spent {
		t.Errorf("%d left once the client closed, want %d (1000 less the %d it admitted)", d.Remaining, 1000-spent, spent)
	}
}

// TestAGuardKeepsSpendingItsShareWithoutTheCluster: a guarded client with a
// share in hand loses every node; it admits from its share until the share
// ends, then the Guard's failure policy answers.
func TestAGuardKeepsSpendingItsShareWithoutTheCluster(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitConverged()
	guard := client.NewGuard(sharingClient(c), client.GuardOptions{OnFailure: client.FailClosed})
	req := client.AllowRequest{Key: "guarded", Limit: &client.Limit{Rate: 1, Period: time.Hour, Burst: 1000, LocalShares: &client.LocalShares{TTL: time.Second, MaxUnits: 1000}}}
	// Enough requests for the client to ask for a share of a few hundred.
	for i := 0; i < 200; i++ {
		if _, err := guard.Allow(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	// Killed, not stopped: a clean stop of three nodes (each giving its
	// shares back, a leader handing over) can outlast the client's
	// one-second share on a loaded machine.
	for _, n := range c.Nodes {
		n.Kill()
	}
	shared := 0
	var last client.GuardDecision
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		d, err := guard.Allow(ctx, req)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		last = d
		if d.Degraded {
			break
		}
		if !d.Allowed || !d.Shared {
			t.Fatalf("with the cluster gone, before the share ended: %+v, want an admission from the share", d)
		}
		shared++
	}
	if shared == 0 || !last.Degraded || last.Allowed {
		t.Fatalf("%d answered from the share, then %+v; want some, then the failure policy (fail closed)", shared, last)
	}
}

// TestAShareAnswersOnlyItsOwnKey: a client holds a share of one key of a
// policy with a key template; another key of the policy, whose dimensions
// read the same as the first's once joined (a value holding a NUL and
// "="), is not answered from that share: its first request goes to the
// cluster, which charges it.
func TestAShareAnswersOnlyItsOwnKey(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
	defer cancel()
	cl := sharingClient(c)
	defer cl.Close(context.Background())
	if _, err := cl.PutPolicy(ctx, "pair", client.Policy{KeyTemplate: "{a}:{c}", Limit: &client.Limit{Rate: 1, Period: time.Hour, Burst: 600},
		LocalShares: &client.LocalShares{TTL: time.Second}}); err != nil {
		t.Fatal(err)
	}
	held := client.AllowRequest{Policy: "pair", Dimensions: map[string]string{"a": "b\x00c=d", "c": "x"}}
	other := client.AllowRequest{Policy: "pair", Dimensions: map[string]string{"a": "b", "c": "d\x00c=x"}}
	shared := false
	for i := 0; i < 100 && !shared; i++ {
		d, err := cl.Allow(ctx, held)
		if err != nil {
			t.Fatal(err)
		}
		shared = d.Shared
	}
	if !shared {
		t.Fatal("the client took no share of the first key")
	}
	d, err := cl.Allow(ctx, other)
	if err != nil || d.Shared || !d.Allowed {
		t.Fatalf("the other key's first request: %+v, %v; want an admission by the cluster", d, err)
	}
	other.Peek = true
	if d, err := client.New(&http.Client{Transport: testcluster.HTTPClient().Transport}, c.Nodes[0].URL()).Allow(ctx, other); err != nil || d.Remaining != 599 {
		t.Fatalf("the other key has %d left (%v); want 599, its first request charged", d.Remaining, err)
	}
}
