package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/api/wire"
	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// TestAPenaltyBlocksAndLiftsOnEveryNode: on a 3-node cluster, three
// denials of a key within a minute (through two followers) block it for 3 s
// of cluster time: every node denies it for the penalty, lists the block,
// counts it in /v1/stats and /metrics, and admits the key again from the
// block's end, never before it.
func TestAPenaltyBlocksAndLiftsOnEveryNode(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3)
	c.WaitLeader()
	hc := testcluster.HTTPClient()
	nodes := c.Running()
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
	defer cancel()
	admin := client.NewWithOptions(client.Options{HTTPClient: hc}, nodes[0].URL())
	if _, err := admin.PutPolicy(ctx, "login", client.Policy{Limit: &client.Limit{Rate: 1, Period: time.Second},
		Penalty: &client.Penalty{Denials: 3, Within: "1m", BlockFor: "3s"}}); err != nil {
		t.Fatal(err)
	}
	// allow asks n for a decision under a request ID of its own, again
	// with the same ID while the cluster cannot decide (an election on a
	// loaded machine), which the cluster counts once.
	requests := 0
	allow := func(n *testcluster.Node) (wire.AllowResponse, int64) {
		t.Helper()
		requests++
		body := fmt.Sprintf(`{"policy":"login","key":"mallory","request_id":"penalty-%d"}`, requests)
		var out wire.AllowResponse
		var at int64
		testenv.WaitFor(t, n.ID+" to decide", func() bool {
			resp, err := hc.Post(n.URL()+"/v1/allow", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				return false
			}
			out = wire.AllowResponse{}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatal(err)
			}
			at, _ = strconv.ParseInt(resp.Header.Get("X-Limitnode-Decided-At"), 10, 64)
			return true
		})
		return out, at
	}
	if d, _ := allow(nodes[1]); !d.Allowed {
		t.Fatalf("the first: %+v", d)
	}
	// Three denials, alternating followers; a token that refilled in the
	// meantime (a second per request on a loaded machine) is admitted, not
	// counted.
	denials := 0
	testenv.WaitFor(t, "three denials by the limit", func() bool {
		switch d, _ := allow(nodes[1+denials%2]); {
		case d.Allowed:
		case d.DeniedBy == nil || d.DeniedBy.Cause != "limit":
			t.Fatalf("denial %d: %+v", denials+1, d)
		default:
			denials++
		}
		return denials == 3
	})
	var until int64
	for _, n := range nodes {
		page, err := client.NewWithOptions(client.Options{HTTPClient: hc}, n.URL()).Blocks(ctx, "", 0)
		if err != nil || len(page.Blocks) != 1 || page.Blocks[0].Penalty != "login" || page.Blocks[0].Reason != "3 denials within 1m0s" {
			t.Fatalf("%s lists %+v %v, want the penalty's block", n.ID, page, err)
		}
		if b := page.Blocks[0]; until == 0 {
			until = b.UntilNanos
		} else if b.UntilNanos != until {
			t.Fatalf("%s says the block ends at %d, another node %d", n.ID, b.UntilNanos, until)
		}
		d, _ := allow(n)
		if d.Allowed || d.Blocked == nil || d.DeniedBy.Cause != "penalty" || d.RetryAfterMS < 1000 {
			t.Fatalf("%s during the block: %+v", n.ID, d)
		}
		var st wire.Stats
		getJSON(t, hc, n.URL()+"/v1/stats", &st)
		if st.Blocked.Count != 1 || st.Blocked.ByPenalty != 1 || len(st.Blocked.Latest) != 1 {
			t.Fatalf("%s's stats: %+v", n.ID, st.Blocked)
		}
		metrics := getText(t, hc, n.URL()+"/metrics")
		if !strings.Contains(metrics, `limitnode_penalties_total{policy="login"} 1`) || !strings.Contains(metrics, `limitnode_blocked_keys{by="penalty"} 1`) {
			t.Fatalf("%s's metrics lack the penalty", n.ID)
		}
	}
	// From its end on, in cluster time, every node admits the key; before
	// it, none does.
	for _, n := range nodes {
		testenv.WaitFor(t, n.ID+" to admit the key after the block", func() bool {
			d, at := allow(n)
			if d.Allowed && at < until-int64(time.Millisecond) {
				t.Fatalf("%s admitted the key at %d, before the block's end %d", n.ID, at, until)
			}
			if !d.Allowed && d.Blocked == nil && at < until-int64(time.Millisecond) {
				t.Fatalf("%s denied the key at %d without the block, before its end: %+v", n.ID, at, d)
			}
			return d.Allowed
		})
	}
}

func getJSON(t *testing.T, hc *http.Client, url string, v any) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func getText(t *testing.T, hc *http.Client, url string) string {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}
