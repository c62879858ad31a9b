package faulttest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// A follower keeps several forwards in flight, and a leader configured
// for it (cluster.Config.MaxEntriesInFlight; the default is one) several
// group-commit entries (appended, not yet applied); these tests hold
// entries in flight on purpose, by slowing the leader's links, and check
// what must not change: a request ID is charged once however many entries
// carry it, and a leader that dies with entries in flight admits nothing
// twice and nothing over the limit.

// pipelined is a cluster whose leader keeps up to four entries in flight.
var pipelined = testcluster.Options{Configure: func(cfg *cluster.Config) { cfg.MaxEntriesInFlight = 4 }}

// flushesInFlight reads a node's limitnode_batch_flushes_in_flight for
// batcher from its /metrics.
func flushesInFlight(t *testing.T, n *testcluster.Node, batcher string) int {
	t.Helper()
	resp, err := testcluster.HTTPClient().Get(n.URL() + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	prefix := `limitnode_batch_flushes_in_flight{batcher="` + batcher + `"} `
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return int(f)
		}
	}
	return 0
}

// slowLeaderLinks delays everything the leader sends to the others, so that
// its entries stay in flight for d each.
func slowLeaderLinks(c *testcluster.Cluster, leader *testcluster.Node, d time.Duration) {
	for _, o := range c.Nodes {
		if o != leader {
			c.Net.Delay(leader.ID, o.ID, d)
		}
	}
}

// TestOneRequestIDInTwoEntriesInFlightIsChargedOnce: the same request is
// sent twice while the first entry carrying it is still in flight, so the
// second goes into another entry in flight at the same time. Raft applies
// them in order: the second is answered with the first's decision, and the
// key is charged once.
func TestOneRequestIDInTwoEntriesInFlightIsChargedOnce(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, pipelined)
	limit := algorithms.Limit{Rate: 10, Period: time.Hour, Burst: 10}
	leader := c.WaitLeader()
	slowLeaderLinks(c, leader, 300*time.Millisecond)
	req := contract.Request{RequestID: "twice-in-flight", Checks: []contract.Check{{Key: "pipelined", Limit: limit, Cost: 3}}}
	type answer struct {
		d   contract.Decision
		err error
	}
	answers := make(chan answer, 2)
	send := func() {
		d, err := leader.Node().Allow(context.Background(), req)
		answers <- answer{d, err}
	}
	go send()
	testenv.WaitFor(t, "the first entry to be in flight", func() bool { return flushesInFlight(t, leader, "leader") >= 1 })
	go send()
	testenv.WaitFor(t, "both entries to be in flight at once", func() bool { return flushesInFlight(t, leader, "leader") >= 2 })
	c.Net.HealAll()
	var got []contract.Decision
	for range 2 {
		a := <-answers
		if a.err != nil {
			t.Fatalf("a request in flight on a leader that stayed: %v", a.err)
		}
		got = append(got, a.d)
	}
	for _, d := range got {
		if !d.Allowed || d.Checks[0].Remaining != 7 || d.AtNanos != got[0].AtNanos {
			t.Fatalf("answers %+v and %+v: want one decision (7 left) for both", got[0], got[1])
		}
	}
	if left := peek(t, leader, "pipelined", limit).Remaining; left != 7 {
		t.Fatalf("%d left after one request of cost 3 sent twice, want 7", left)
	}
}

// TestALeaderKilledWithEntriesInFlightAdmitsNothingTwice: the leader is
// killed (no hand-over, as kill -9) while three entries of requests are in
// flight on it, the second carrying request IDs the first carries too.
// Every caller retries with its ID through any running node until it has
// an answer: the admissions never exceed the limit, each request is charged
// at most once, and what is left is the limit less exactly the admissions
// answered.
func TestALeaderKilledWithEntriesInFlightAdmitsNothingTwice(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, pipelined)
	const burst, waves, perWave = 20, 3, 12
	limit := algorithms.Limit{Rate: burst, Period: time.Hour, Burst: burst}
	leader := c.WaitLeader()
	slowLeaderLinks(c, leader, 250*time.Millisecond)

	// idOf is the request ID of caller i of a wave: the second wave's
	// even callers repeat the first wave's IDs.
	idOf := func(wave, i int) string {
		if wave == 1 && i%2 == 0 {
			wave = 0
		}
		return fmt.Sprintf("kill-%d-%d", wave, i)
	}
	var wg sync.WaitGroup
	results := make([][perWave]contract.Decision, waves)
	errs := make(chan error, waves*perWave)
	for wave := range waves {
		for i := range perWave {
			id := idOf(wave, i)
			req := contract.Request{RequestID: id, Checks: []contract.Check{{Key: "in-flight", Limit: limit, Cost: 1}}}
			wg.Go(func() {
				node := leader
				for attempt := 0; ; attempt++ {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					d, err := node.Node().Allow(ctx, req)
					cancel()
					if err == nil {
						results[wave][i] = d
						return
					}
					if !errors.Is(err, contract.ErrOutcomeUnknown) && !errors.Is(err, contract.ErrNoLeader) && !errors.Is(err, contract.ErrShutdown) {
						errs <- fmt.Errorf("request %s: %w", id, err)
						return
					}
					if attempt > 200 {
						errs <- fmt.Errorf("request %s never got an answer: %w", id, err)
						return
					}
					running := c.Running()
					node = running[attempt%len(running)]
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		// The next wave goes out once this one is in flight, so that it
		// takes an entry of its own.
		testenv.WaitFor(t, fmt.Sprintf("%d entries in flight on the leader", wave+1), func() bool { return flushesInFlight(t, leader, "leader") >= wave+1 })
	}
	leader.Kill()
	c.Net.HealAll()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	admitted := 0
	byID := map[string]contract.Decision{}
	for wave := range waves {
		for i, d := range results[wave] {
			id := idOf(wave, i)
			if first, ok := byID[id]; ok {
				if first.Allowed != d.Allowed || first.AtNanos != d.AtNanos {
					t.Errorf("request %s answered twice differently: %+v and %+v", id, first, d)
				}
				continue
			}
			byID[id] = d
			if d.Allowed {
				admitted++
			}
		}
	}
	if admitted > burst {
		t.Fatalf("%d requests admitted against a limit of %d", admitted, burst)
	}
	leader.Restart()
	c.WaitConverged()
	if left := peek(t, leader, "in-flight", limit).Remaining; left != int64(burst-admitted) {
		t.Fatalf("%d left after %d admissions of cost 1 against %d: a request was charged twice or not at all", left, admitted, burst)
	}
}

// TestAFollowerForwardsWhileItsForwardsAreInFlight: requests reaching a
// follower one after another, while its link to the leader is slow, each
// go out at once in a forward of their own, up to the default four under
// way, instead of waiting for the forwards before them.
func TestAFollowerForwardsWhileItsForwardsAreInFlight(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	limit := algorithms.Limit{Rate: 10, Period: time.Hour, Burst: 10}
	leader := c.WaitLeader()
	follower := c.Followers()[0]
	c.Net.Delay(follower.ID, leader.ID, 300*time.Millisecond)
	const forwards = 4
	errs := make(chan error, forwards)
	for i := range forwards {
		go func() {
			_, err := follower.Node().Allow(context.Background(), contract.Request{Checks: []contract.Check{{Key: fmt.Sprint("forwarded-", i), Limit: limit, Cost: 1}}})
			errs <- err
		}()
		testenv.WaitFor(t, fmt.Sprintf("%d forwards in flight", i+1), func() bool { return flushesInFlight(t, follower, "follower") >= i+1 })
	}
	c.Net.HealAll()
	for range forwards {
		if err := <-errs; err != nil {
			t.Fatalf("a forwarded request: %v", err)
		}
	}
}
