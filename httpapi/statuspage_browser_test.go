package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// browse loads url in headless Chromium and returns the DOM it rendered;
// with screenshot set, it also writes a PNG there.
func browse(t *testing.T, url, screenshot string) string {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,1600"}
	if screenshot != "" {
		args = append(args, "--screenshot="+screenshot)
	} else {
		args = append(args, "--dump-dom")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "chromium", append(args, url)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
	}
	return stdout.String()
}

// pageOf serves a node's status page on a local address for the browser,
// adding the API token and trusting the test CA when the cluster is secure
// (a browser cannot send a bearer token by itself).
func pageOf(t *testing.T, n *testcluster.Node) string {
	t.Helper()
	target, err := url.Parse(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = testcluster.HTTPClient().Transport
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

type nodeStats struct {
	Cluster struct {
		Leader string
		Nodes  []struct {
			ID        string
			Reachable *bool
		}
	}
	TopKeys []struct{ Name string } `json:"top_denied_keys"`
}

func statsOf(t *testing.T, n *testcluster.Node) nodeStats {
	t.Helper()
	resp, err := testcluster.HTTPClient().Get(n.URL() + "/v1/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st nodeStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStatusPageInABrowser drives allowed and denied traffic on a few hot
// keys of a 3-node cluster, then loads the status page of a follower in
// headless Chromium: the rendered page names the three nodes, the leader
// and the hottest denied key. A screenshot is written to the test's
// directory. A node that is killed shows as unreachable on the survivors'
// pages. An election on a loaded machine may move the lead at any time:
// the page must name the leader of the moment it was rendered.
func TestStatusPageInABrowser(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "chromium")
	c := testcluster.Start(t, 3)
	ctx := context.Background()
	if err := c.WaitLeader().Node().PutPolicy(ctx, contract.Policy{Name: "per-user", KeyTemplate: "user:{user}",
		Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 5, Period: time.Hour, Burst: 5}}); err != nil {
		t.Fatal(err)
	}
	// The hottest denied keys are the leader's count (a denial answered
	// without a log entry is counted where it was answered): a round drives
	// the traffic through the leader and renders the page under it, and a
	// lead that moves meanwhile takes another round, on keys of its own.
	var follower *testcluster.Node
	var dom, hot, warm string
	round := 0
	testenv.WaitFor(t, "a page rendered under the leader that counted the traffic, naming it and the hottest denied key first", func() bool {
		round++
		leader := c.WaitLeader()
		follower = c.Followers()[0]
		hot, warm = fmt.Sprintf("hot-mallory-%d", round), fmt.Sprintf("warm-eve-%d", round)
		for user, calls := range map[string]int{hot: 40, warm: 15, fmt.Sprintf("calm-alice-%d", round): 3} {
			for range calls {
				_, err := leader.Node().Allow(ctx, contract.Request{Checks: []contract.Check{{Policy: "per-user",
					Dimensions: []contract.Dimension{{Name: "user", Value: user}}, Cost: 1}}})
				if err != nil && !errors.Is(err, contract.ErrNoLeader) && !errors.Is(err, contract.ErrOutcomeUnknown) {
					t.Fatal(err)
				}
			}
		}
		testenv.WaitFor(t, "the leader's stats to name the hottest key, or the lead to move", func() bool {
			st := statsOf(t, leader)
			return c.WaitLeader() != leader || (len(st.TopKeys) > 0 && st.TopKeys[0].Name == "user:"+hot)
		})
		// The follower's page asks the leader for its stats: render it
		// until it has them, while the lead stays.
		page, rendered := pageOf(t, follower), false
		testenv.WaitFor(t, "the follower's page to name the leader and the hottest key first, or the lead to move", func() bool {
			if c.WaitLeader() != leader {
				return true
			}
			dom = browse(t, page, "")
			i, j := strings.Index(dom, "<code>user:"+hot+"</code>"), strings.Index(dom, "<code>user:"+warm+"</code>")
			rendered = c.WaitLeader() == leader && strings.Contains(dom, `<strong id="leader">`+leader.ID+`</strong>`) && i >= 0 && j > i
			return rendered
		})
		return rendered
	})
	for _, want := range []string{
		`<span id="self">` + follower.ID + `</span>`,
		`data-node="n1"`, `data-node="n2"`, `data-node="n3"`,
		`<polyline class="denied"`,
	} {
		if !strings.Contains(dom, want) {
			t.Fatalf("the rendered page lacks %s:\n%s", want, dom)
		}
	}
	page := pageOf(t, follower)
	shot := filepath.Join(t.TempDir(), "status.png")
	browse(t, page, shot)
	if data, err := os.ReadFile(shot); err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Fatalf("no PNG screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot of %s's status page: %s", follower.ID, shot)

	// The victim is a node other than the page's, a follower if one is.
	var victim *testcluster.Node
	for _, n := range append(c.Followers(), c.Nodes...) {
		if victim == nil && n != follower {
			victim = n
		}
	}
	victim.Kill()
	for _, survivor := range c.Running() {
		testenv.WaitFor(t, fmt.Sprintf("%s to see %s unreachable", survivor.ID, victim.ID), func() bool {
			for _, n := range statsOf(t, survivor).Cluster.Nodes {
				if n.ID == victim.ID && n.Reachable != nil && !*n.Reachable {
					return true
				}
			}
			return false
		})
		// The page is read a moment after the stats: let it catch up with
		// them too, as a person would reload it.
		page, row := pageOf(t, survivor), ""
		testenv.WaitFor(t, fmt.Sprintf("%s's page to show %s unreachable", survivor.ID, victim.ID), func() bool {
			_, row, _ = strings.Cut(browse(t, page, ""), `data-node="`+victim.ID+`"`)
			row, _, _ = strings.Cut(row, "</tr>")
			return strings.Contains(row, "unreachable")
		})
	}
}
