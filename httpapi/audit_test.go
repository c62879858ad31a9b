package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// TestTheAuditTrailNamesTheTokenOfEachChange: on a secure 3-node cluster,
// changes made with the admin token through a follower are recorded with
// the token's name (never the token), their log index and cluster time; a
// policy's record has the index its version shows; every node reads the
// same trail; a restore keeps it and adds itself; the status page shows the
// last changes.
func TestTheAuditTrailNamesTheTokenOfEachChange(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{Secure: true})
	c.WaitLeader()
	follower := c.Followers()[0]
	cl := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, follower.URL())
	ctx, cancel := context.WithTimeout(context.Background(), testcluster.WaitTimeout)
	defer cancel()
	// change makes a change, again while the cluster cannot say whether it
	// made it (503: an election on a loaded machine); a change made twice
	// that way is in the trail twice, side by side.
	retried := map[string]bool{}
	change := func(action string, attempt func() error) {
		t.Helper()
		var err error
		testenv.WaitFor(t, action+" to be answered", func() bool {
			err = attempt()
			var apiErr *client.Error
			if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusServiceUnavailable {
				retried[action] = true
				return false
			}
			return true
		})
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
	}
	before := time.Now()
	change("policy.put", func() error {
		_, err := cl.PutPolicy(ctx, "api", client.Policy{Limit: &client.Limit{Rate: 100, Period: time.Minute}})
		return err
	})
	change("block.put", func() error { _, err := cl.PutBlock(ctx, "scraper", time.Hour, "too fast"); return err })
	if err := cl.DeletePolicy(ctx, "missing"); err == nil {
		t.Fatal("deleting a policy that is not there succeeded")
	}
	var backup bytes.Buffer
	if _, err := cl.Backup(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	change("restore", func() error {
		leader := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, c.WaitLeader().URL())
		_, err := leader.Restore(ctx, bytes.NewReader(backup.Bytes()), int64(backup.Len()))
		return err
	})
	p, err := cl.GetPolicy(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}

	want := []struct{ action, subject, detail string }{
		{"policy.put", "api", "token_bucket 100 per 1m0s"},
		{"block.put", "scraper", "for 1h0m0s: too fast"},
		{"restore", "", ""},
	}
	for _, n := range c.Running() {
		page, err := client.NewWithOptions(client.Options{HTTPClient: testcluster.HTTPClient()}, n.URL()).Audit(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var entries []client.AuditEntry
		for _, e := range page.Entries {
			switch last := len(entries) - 1; {
			case len(entries) == 0 && e.Action == "member.join" && e.Actor == "":
				// the cluster forming, before any token asked
			case last >= 0 && retried[e.Action] && e.Action == entries[last].Action && e.Subject == entries[last].Subject && e.Detail == entries[last].Detail:
				entries[last] = e // made twice: the second is the one that counts
			default:
				entries = append(entries, e)
			}
		}
		if len(entries) != len(want) || page.Dropped != 0 {
			t.Fatalf("%s: the trail %+v, want the formation's joins and %d entries (a refused change records nothing)", n.ID, page, len(want))
		}
		for i, w := range want {
			e := entries[i]
			if e.Actor != "test-admin" || e.Action != w.action || (w.subject != "" && e.Subject != w.subject) || (w.detail != "" && e.Detail != w.detail) {
				t.Errorf("%s: entry %d is %+v, want %s of %q by test-admin", n.ID, i, e, w.action, w.subject)
			}
			if at := time.Unix(0, e.AtNanos); at.Before(before.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
				t.Errorf("%s: entry %d at %v, not the cluster time of the change", n.ID, i, at)
			}
			if i > 0 && e.Index <= entries[i-1].Index {
				t.Errorf("%s: entries out of order: %+v", n.ID, entries)
			}
			if strings.Contains(e.Actor+e.Subject+e.Detail, testcluster.Token("admin")) {
				t.Fatal("the trail holds the token")
			}
		}
		if entries[0].Index != p.Version {
			t.Errorf("%s: the policy's record is at index %d, its version %d", n.ID, entries[0].Index, p.Version)
		}
	}
	if page, err := cl.Audit(ctx, p.Version, 1); err != nil || len(page.Entries) != 1 || page.Entries[0].Action != "block.put" || page.Next == 0 {
		t.Fatalf("a page after the policy's change: %+v %v", page, err)
	}

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, follower.URL()+"/", nil)
	resp, err := testcluster.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page bytes.Buffer
	_, _ = page.ReadFrom(resp.Body)
	if s := page.String(); !strings.Contains(s, `id="recent-changes"`) || !strings.Contains(s, "test-admin") || !strings.Contains(s, "<code>restore</code>") {
		t.Fatalf("the status page lacks the last changes:\n%s", s)
	}
}
