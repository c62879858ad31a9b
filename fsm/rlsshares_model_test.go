package fsm

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/rls"
	"pgregory.net/rapid"
)

// modelShare is a share of an RLS descriptor as its holder sees it.
type modelShare struct {
	id           uint64
	units, spent int64
	until        int64
	done         bool
}

// TestRLSSharesNeverAdmitMoreThanTheLimit drives one RLS descriptor whose
// rate_limit has local_shares through the state machine, with random
// queries (with and without a share ask, of random hits), a holder that
// spends its shares at any moment before they end and gives back what is
// left, the domain put again (with or without local_shares, under the same
// limit), and time that passes: what the log and the holder admitted
// together stays within the limit over every interval (a bucket's burst
// plus what refills over it; a fixed window's rate per window; the log's
// rate per period), for each algorithm whose bound is exact.
func TestRLSSharesNeverAdmitMoreThanTheLimit(t *testing.T) {
	t.Parallel()
	var spent atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		if over := simulateRLSShares(t, rt, &spent); over != "" {
			rt.Fatal(over)
		}
	})
	if spent.Load() == 0 {
		t.Error("no unit was spent from a share: the property was not exercised")
	}
}

// simulateRLSShares runs one random case, counting in spentFromShares
// what the holder spent, and returns how it broke the limit, or "".
func simulateRLSShares(t *testing.T, rt *rapid.T, spentFromShares *atomic.Int64) string {
	alg := rapid.SampledFrom([]string{"token_bucket", "gcra", "fixed_window", "sliding_window_log"}).Draw(rt, "algorithm")
	rate := rapid.Int64Range(1, 40).Draw(rt, "rate")
	burst := ""
	if alg == "token_bucket" || alg == "gcra" {
		burst = fmt.Sprintf(", burst: %d", rapid.Int64Range(1, 2*rate).Draw(rt, "burst"))
	}
	ttl := rapid.SampledFrom([]string{"10ms", "300ms", "1s"}).Draw(rt, "ttl")
	yaml := fmt.Sprintf("domain: p\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: %d, algorithm: %s%s, local_shares: {ttl: %s}}\n", rate, alg, burst, ttl)
	conf, perr := rls.Parse([]byte(yaml))
	if perr != nil {
		return perr.Error()
	}
	limit, _ := rls.Limit(conf.Descriptors[0].RateLimit)
	a := newApplier(t)
	a.putRLS(yaml)
	now := rapid.Int64Range(1e18, 1e18+int64(time.Hour)).Draw(rt, "start")
	var held []*modelShare
	var admitted []testenv.Admission
	live := func() *modelShare {
		var open []*modelShare
		for _, h := range held {
			if !h.done && now < h.until {
				open = append(open, h)
			}
		}
		if len(open) == 0 {
			return nil
		}
		return open[rapid.IntRange(0, len(open)-1).Draw(rt, "share")]
	}
	for range rapid.IntRange(1, 60).Draw(rt, "steps") {
		now += rapid.Int64Range(0, int64(400*time.Millisecond)).Draw(rt, "gap")
		switch rapid.IntRange(0, 4).Draw(rt, "action") {
		case 0, 1: // a query, asking for a share or not
			hits := rapid.Int64Range(0, 3).Draw(rt, "hits")
			req := Request{RLS: rlsQuery("p", hits, []rls.Entry{{Key: "k"}})}
			if rapid.Bool().Draw(rt, "ask") {
				req = askFor(req, rapid.Int64Range(1, 2*rate).Draw(rt, "units"), time.Second)
			}
			r := a.allow(now, req)[0]
			if r.Rejection != nil {
				return fmt.Sprintf("refused: %v", r.Rejection)
			}
			if r.Allowed {
				admitted = append(admitted, testenv.Admission{At: now, Units: hits})
			}
			if g := r.Share; g != nil {
				held = append(held, &modelShare{id: g.ID, units: g.Units, until: g.UntilNanos})
			}
		case 2: // the holder spends from a share before it ends
			if h := live(); h != nil {
				n := rapid.Int64Range(0, h.units-h.spent).Draw(rt, "spend")
				h.spent += n
				spentFromShares.Add(n)
				admitted = append(admitted, testenv.Admission{At: now, Units: n})
			}
		case 3: // the holder gives back what it did not spend
			if h := live(); h != nil {
				h.done = true
				a.returnRLSShare(now, rlsQuery("p", 0, []rls.Entry{{Key: "k"}}), h.id, h.units-h.spent)
			}
		case 4: // the domain is put again, with or without local_shares, under the same limit
			again := yaml
			if rapid.Bool().Draw(rt, "without") {
				again = strings.Replace(yaml, ", local_shares: {ttl: "+ttl+"}", "", 1)
			}
			if resp := a.putRLS(again); resp != nil {
				return fmt.Sprintf("put: %v", resp)
			}
		}
	}
	return testenv.OverTheLimit(limit, admitted)
}
