package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// leaseAnswer is POST /v1/leases' answer.
type leaseAnswer struct {
	status   int
	ID       string `json:"id"`
	Active   int64  `json:"active"`
	Waiting  int64  `json:"waiting"`
	WaitedMS int64  `json:"waited_ms"`
}

// postLease asks for a lease; it reports a failed exchange as an error, so
// that it can run on any goroutine.
func postLease(ctx context.Context, url, body string) (leaseAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/leases", strings.NewReader(body))
	if err != nil {
		return leaseAnswer{}, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return leaseAnswer{}, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	out := leaseAnswer{status: resp.StatusCode}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("answer %d %q: %w", resp.StatusCode, data, err)
	}
	return out, nil
}

// queueOf returns the IDs waiting on key, in queue order, as node url has
// applied them.
func queueOf(t *testing.T, url, key string) []string {
	t.Helper()
	status, body := do(t, "GET", url+"/v1/leases?key="+key, "")
	if status != 200 {
		t.Fatalf("list leases: %d %v", status, body)
	}
	var ids []string
	for _, w := range body["waiting"].([]any) {
		ids = append(ids, w.(map[string]any)["id"].(string))
	}
	return ids
}

// releaseLease gives a lease back through url, trying again while the
// cluster has no leader; a 404 after a failed attempt means that attempt
// released it.
func releaseLease(t *testing.T, url, id string) {
	t.Helper()
	deadline := time.Now().Add(testcluster.WaitTimeout)
	retried := false
	for {
		status, body := do(t, "DELETE", url+"/v1/leases/"+id, "")
		if status == 200 || (status == 404 && retried) {
			return
		}
		if status != 503 || time.Now().After(deadline) {
			t.Fatalf("release %s: %d %v", id, status, body)
		}
		retried = true
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLeaseQueueThroughLeaderFailover: 50 callers on the followers ask for
// 5 slots with a queue of 10. Five are granted, ten wait, the rest are
// refused at once. Then the holders give their slots back one at a time,
// and the leader is killed midway: every waiter is granted, in the order it
// joined the queue, and no more than 5 ever hold a slot.
func TestLeaseQueueThroughLeaderFailover(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	leader := c.WaitLeader()
	followers := c.Followers()
	const (
		callers = 50
		body    = `{"key":"reports","max":5,"ttl":"1m","max_wait":"1m","max_queue":10}`
	)
	var holding, mostHolding atomic.Int64
	granted := make(chan leaseAnswer, callers)
	refused := make(chan leaseAnswer, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			a, err := postLease(t.Context(), followers[i%2].URL(), body)
			switch {
			case err != nil:
				t.Errorf("caller %d: %v", i, err)
			case a.status == 200:
				now := holding.Add(1)
				for m := mostHolding.Load(); now > m && !mostHolding.CompareAndSwap(m, now); m = mostHolding.Load() {
				}
				granted <- a
			case a.status == 429:
				refused <- a
			default:
				t.Errorf("caller %d: %+v", i, a)
			}
		})
	}
	// Five holders, then 35 refusals: the other ten wait.
	var holders []string
	for range 5 {
		holders = append(holders, (<-granted).ID)
	}
	for range callers - 15 {
		if a := <-refused; a.WaitedMS != 0 || a.Waiting != 10 {
			t.Fatalf("a refusal that was not at once for a full queue: %+v", a)
		}
	}
	var queue []string
	for _, f := range followers {
		for deadline := time.Now().Add(testcluster.WaitTimeout); len(queue) < 10 || !slices.Equal(queue, queueOf(t, f.URL(), "reports")); {
			queue = queueOf(t, f.URL(), "reports")
			if time.Now().After(deadline) {
				t.Fatalf("%s shows the queue %v", f.ID, queue)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if len(queue) != 10 {
		t.Fatalf("%d wait, want 10", len(queue))
	}
	if metrics := getText(t, followers[0].URL()+"/metrics"); !strings.Contains(metrics, "\nlimitnode_lease_waiters 10\n") || !strings.Contains(metrics, "\nlimitnode_live_leases 5\n") {
		t.Fatalf("the metrics do not show 5 leases and 10 waiters:\n%s", metrics)
	}
	select {
	case a := <-granted:
		t.Fatalf("a sixth slot granted while five were held: %+v", a)
	case a := <-refused:
		t.Fatalf("a waiter refused: %+v", a)
	default:
	}

	// Free one slot at a time and see who gets it; kill the leader after
	// the third.
	var order []string
	for i := range 10 {
		if i == 3 {
			leader.Kill()
		}
		holding.Add(-1)
		releaseLease(t, followers[i%2].URL(), holders[0])
		holders = holders[1:]
		select {
		case a := <-granted:
			order = append(order, a.ID)
			holders = append(holders, a.ID)
		case a := <-refused:
			t.Fatalf("waiter refused after the release of slot %d: %+v", i, a)
		case <-time.After(testcluster.WaitTimeout):
			t.Fatalf("no waiter granted after the release of slot %d (granted so far %v of %v)", i, order, queue)
		}
	}
	wg.Wait()
	if !slices.Equal(order, queue) {
		t.Fatalf("granted in the order %v, queued in the order %v", order, queue)
	}
	if m := mostHolding.Load(); m > 5 {
		t.Fatalf("%d held a slot at once", m)
	}
	status, body2 := do(t, "GET", followers[0].URL()+"/v1/leases?key=reports", "")
	if held := body2["leases"].([]any); status != 200 || len(held) != 5 {
		t.Fatalf("after the run: %d %v", status, body2)
	}
}

// TestLeaseWaiterLeavesWhenItsCallerGoes: a waiter whose caller closes the
// connection is out of the queue within a second, on every node.
func TestLeaseWaiterLeavesWhenItsCallerGoes(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	f := c.Followers()[0]
	if status, body := do(t, "POST", f.URL()+"/v1/leases", `{"key":"k","max":1,"ttl":"1m"}`); status != 200 {
		t.Fatalf("holder: %d %v", status, body)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := postLease(ctx, f.URL(), `{"key":"k","max":1,"ttl":"1m","max_wait":"5m","max_queue":1}`)
		done <- err
	}()
	for deadline := time.Now().Add(testcluster.WaitTimeout); len(queueOf(t, f.URL(), "k")) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never joined the queue")
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled request was answered")
	}
	gone := time.Now()
	waitQueueEmpty(t, f, "k")
	if took := time.Since(gone); took > time.Second {
		t.Fatalf("the waiter left the queue %s after its caller went", took)
	}
	for _, n := range c.Running() {
		waitQueueEmpty(t, n, "k")
	}
}

// TestLeaseQueueMovesWithTimeAlone: with nothing else appended, a waiter is
// granted when a lease expires and refused when its wait runs out.
func TestLeaseQueueMovesWithTimeAlone(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	f := c.Followers()[0]
	if status, body := do(t, "POST", f.URL()+"/v1/leases", `{"key":"expiring","max":1,"ttl":"300ms"}`); status != 200 {
		t.Fatalf("holder: %d %v", status, body)
	}
	a, err := postLease(t.Context(), f.URL(), `{"key":"expiring","max":1,"ttl":"1m","max_wait":"1m","max_queue":1}`)
	// Granted at the tick that finds the lease expired: about 300ms
	// after it was taken, later on a loaded machine, long before the
	// waiter's minute runs out.
	if err != nil || a.status != 200 || a.WaitedMS < 1 || a.WaitedMS > 30_000 {
		t.Fatalf("the waiter for an expiring lease: %+v %v", a, err)
	}
	// Now the slot is held for a minute: a waiter with 300ms leaves
	// without it, having waited its whole max_wait of cluster time.
	a, err = postLease(t.Context(), f.URL(), `{"key":"expiring","max":1,"ttl":"1m","max_wait":"300ms","max_queue":1}`)
	if err != nil || a.status != 429 || a.WaitedMS < 300 || a.Waiting != 0 {
		t.Fatalf("the waiter whose wait ran out: %+v %v", a, err)
	}
	for _, n := range c.Running() {
		waitQueueEmpty(t, n, "expiring")
	}
}

// waitQueueEmpty waits until node n has applied an empty queue for key.
func waitQueueEmpty(t *testing.T, n *testcluster.Node, key string) {
	t.Helper()
	for deadline := time.Now().Add(testcluster.WaitTimeout); ; time.Sleep(5 * time.Millisecond) {
		q := queueOf(t, n.URL(), key)
		if len(q) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still shows %v waiting", n.ID, q)
		}
	}
}

// TestLeaseRenewal: a lease renewed through a follower expires its new TTL
// after the renewal, on every node; a lease not held cannot be renewed.
func TestLeaseRenewal(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	f := c.Followers()[0]
	status, body := do(t, "POST", f.URL()+"/v1/leases", `{"key":"renewed","max":1,"ttl":"2s"}`)
	if status != 200 {
		t.Fatalf("acquire: %d %v", status, body)
	}
	id := body["id"].(string)
	status, body = do(t, "POST", f.URL()+"/v1/leases/"+id+"/renew", `{"ttl":"1h"}`)
	if status != 200 || body["expires_in_ms"].(float64) != 3_600_000 || body["key"] != "renewed" {
		t.Fatalf("renew: %d %v", status, body)
	}
	for _, n := range c.Running() {
		for deadline := time.Now().Add(testcluster.WaitTimeout); ; time.Sleep(5 * time.Millisecond) {
			_, list := do(t, "GET", n.URL()+"/v1/leases?key=renewed", "")
			if held := list["leases"].([]any); len(held) == 1 && held[0].(map[string]any)["expires_in_ms"].(float64) > 3_000_000 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never showed the renewal: %v", n.ID, list)
			}
		}
	}
	if status, body := do(t, "POST", f.URL()+"/v1/leases/nobody/renew", `{"ttl":"1h"}`); status != 404 || body["field"] != "id" {
		t.Fatalf("renew of a lease not held: %d %v", status, body)
	}
}

// getText returns the body of a GET that must answer 200.
func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, data)
	}
	return string(data)
}

// TestLeaseGrantedToACrashedWaiterComesBack: the node where a waiter waits
// crashes, then a slot is given back: the slot goes to the waiter, as its
// place in the queue says, but nobody claims it, so it is free again after
// the claim window rather than after the lease's hour-long TTL.
func TestLeaseGrantedToACrashedWaiterComesBack(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	followers := c.Followers()
	waiterNode, other := followers[0], followers[1]
	status, body := do(t, "POST", other.URL()+"/v1/leases", `{"key":"orphan","max":1,"ttl":"1h"}`)
	if status != 200 {
		t.Fatalf("holder: %d %v", status, body)
	}
	holder := body["id"].(string)
	go func() {
		_, _ = postLease(context.Background(), waiterNode.URL(), `{"key":"orphan","max":1,"ttl":"1h","max_wait":"1m","max_queue":1}`)
	}()
	for deadline := time.Now().Add(testcluster.WaitTimeout); len(queueOf(t, other.URL(), "orphan")) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never joined the queue")
		}
	}
	// Cut off first, so that the node cannot withdraw its waiter as it
	// goes down: a crash, not a shutdown.
	c.Isolate(waiterNode)
	waiterNode.Kill()
	c.Net.HealAll()
	releaseLease(t, other.URL(), holder)
	// The slot went to the crashed waiter: refused now...
	if status, body := do(t, "POST", other.URL()+"/v1/leases", `{"key":"orphan","max":1,"ttl":"1h"}`); status != 429 || body["retry_after_ms"].(float64) > float64(fsm.LeaseClaimWindow/time.Millisecond) {
		t.Fatalf("right after the release: %d %v, want 429 until the claim window ends", status, body)
	}
	// ...and free again once its claim window has passed.
	for deadline := time.Now().Add(testcluster.WaitTimeout); ; time.Sleep(100 * time.Millisecond) {
		status, body := do(t, "POST", other.URL()+"/v1/leases", `{"key":"orphan","max":1,"ttl":"1h"}`)
		if status == 200 {
			break
		}
		if status != 429 && status != 503 || time.Now().After(deadline) {
			t.Fatalf("the unclaimed slot never came back: %d %v", status, body)
		}
	}
}

// TestLeaseListingsCountDownOnAnIdleCluster: GET /v1/leases reads the state
// at this node's reading of cluster time now, not at the last entry it
// applied, so on a cluster where nothing else happens a lease's time left
// goes down.
func TestLeaseListingsCountDownOnAnIdleCluster(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	follower := c.Followers()[0]
	if status, body := do(t, "POST", c.WaitLeader().URL()+"/v1/leases", `{"key":"idle","max":1,"ttl":"10s"}`); status != 200 {
		t.Fatalf("acquire: %d %v", status, body)
	}
	testenv.WaitFor(t, "the follower's listing to count down", func() bool {
		status, body := do(t, "GET", follower.URL()+"/v1/leases?key=idle", "")
		leases, _ := body["leases"].([]any)
		if status != 200 || len(leases) != 1 {
			return false
		}
		left, _ := leases[0].(map[string]any)["expires_in_ms"].(float64)
		return left > 0 && left < 10000
	})
}

// TestARetriedWaiterIsAnsweredWithItsGrant: the first attempt of an acquire
// that may wait joins the queue and its answer is lost; a slot is granted
// to it; the call's next attempt, with the same ID, is answered with that
// grant, as a waiter that heard it would be: at the grant's cluster time,
// with its wait, and expiring its TTL after the grant (the claim gives it
// that when its TTL is over the claim window).
func TestARetriedWaiterIsAnsweredWithItsGrant(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	node := c.Followers()[0].Node()
	for _, ttl := range []time.Duration{4 * time.Second, time.Hour} {
		t.Run("ttl="+ttl.String(), func(t *testing.T) {
			key, id := "retried-"+ttl.String(), "retried-waiter-"+ttl.String()
			holder, err := node.AcquireLease(t.Context(), contract.LeaseRequest{Key: key, Max: 1, TTL: time.Hour})
			if err != nil || !holder.Granted {
				t.Fatalf("holder: %+v %v", holder, err)
			}
			req := contract.LeaseRequest{Key: key, Max: 1, TTL: ttl, MaxWait: time.Minute, MaxQueue: 1}
			first, err := node.LeaseCommandOnLeader(t.Context(), fsm.CommandAcquireLease, fsm.LeaseCommand{ID: id, Key: key, Max: 1,
				TTLNanos: int64(ttl), MaxWaitNanos: int64(req.MaxWait), MaxQueue: req.MaxQueue})
			if err != nil || !first.Queued {
				t.Fatalf("the first attempt: %+v %v", first, err)
			}
			grantedAt, err := node.ReleaseLease(t.Context(), holder.ID)
			if err != nil {
				t.Fatalf("release the holder: %v", err)
			}
			l, err := node.AcquireLeaseWithID(t.Context(), id, req)
			if err != nil {
				t.Fatalf("the retry: %v", err)
			}
			want := contract.Lease{ID: id, Key: key, Max: 1, Granted: true, Active: 1, AtNanos: grantedAt,
				Waited: time.Duration(grantedAt - first.AtNanos), ExpiresAtNanos: grantedAt + int64(ttl)}
			if l != want {
				t.Fatalf("the retry's answer:\n got  %+v\n want %+v (granted when the holder gave its slot back)", l, want)
			}
		})
	}
}
