package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
)

// documentedTransport checks every exchange it carries against
// api/openapi.yaml.
type documentedTransport struct {
	t    *testing.T
	spec *openAPISpec
	mu   sync.Mutex
	seen map[string]bool // operations exchanged
}

func (d *documentedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := checkAgainstOpenAPI(d.spec, req, reqBody, resp.StatusCode, resp.Header, body); err != nil {
		d.t.Errorf("the client's %s %s (answered %d) against api/openapi.yaml: %v\nrequest body: %s", req.Method, req.URL.Path, resp.StatusCode, err, reqBody)
	}
	d.mu.Lock()
	d.seen[d.spec.operation(req)] = true
	d.mu.Unlock()
	return resp, nil
}

// TestTheGoClientSpeaksTheDocument drives package client against the
// handler and checks each of its requests, and the answers it reads,
// against api/openapi.yaml: both sides spell their bodies with package wire,
// and this keeps that spelling the document's.
func TestTheGoClientSpeaksTheDocument(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newTestAPI(newFake()))
	defer srv.Close()
	tr := &documentedTransport{t: t, spec: openAPI(t), seen: map[string]bool{}}
	c := client.New(&http.Client{Transport: tr, Timeout: 10 * time.Second}, srv.URL)
	ctx := context.Background()
	cost := int64(2)
	limit := &client.Limit{Algorithm: "gcra", Rate: 5, Period: time.Second, Burst: 2}
	calls := []struct {
		name string
		call func() error
	}{
		{"allow inline", func() error {
			_, err := c.Allow(ctx, client.AllowRequest{Key: "k", Limit: limit, Cost: cost, RequestID: "r-1"})
			return err
		}},
		{"allow with checks and a reservation", func() error {
			_, err := c.Allow(ctx, client.AllowRequest{Checks: []client.Check{{Key: "a", Limit: limit}, {Key: "b", Limit: &client.Limit{Rate: 10}}}, MaxWait: time.Second, Hold: true})
			return err
		}},
		{"put a policy", func() error {
			_, err := c.PutPolicy(ctx, "p", client.Policy{Limit: &client.Limit{Rate: 100, Period: time.Minute}, Overrides: map[string]*client.Limit{"vip": {Algorithm: "fixed_window", Rate: 1000}}, KeyTemplate: "{user}"})
			return err
		}},
		{"allow by policy", func() error {
			_, err := c.Allow(ctx, client.AllowRequest{Policy: "p", Dimensions: map[string]string{"user": "u1"}})
			return err
		}},
		{"get a policy", func() error { _, err := c.GetPolicy(ctx, "p"); return err }},
		{"list policies", func() error { _, err := c.ListPolicies(ctx, "", 10); return err }},
		{"delete a policy", func() error { return c.DeletePolicy(ctx, "p") }},
		{"acquire, renew and release a lease", func() error {
			l, err := c.AcquireLease(ctx, client.LeaseRequest{Key: "reports", Max: 2, TTL: time.Minute, MaxWait: time.Second, MaxQueue: 5})
			if err != nil {
				return err
			}
			if _, err := c.RenewLease(ctx, l.ID, 2*time.Minute); err != nil {
				return err
			}
			return c.ReleaseLease(ctx, l.ID)
		}},
		{"join", func() error {
			return c.JoinWith(ctx, client.Member{ID: "n2", RaftAddr: "127.0.0.1:8002", HTTPAddr: "127.0.0.1:7002"}, client.MemberChange{Replace: true, Force: true})
		}},
		{"remove", func() error { return c.RemoveMemberWith(ctx, "n2", client.MemberChange{Force: true}) }},
		{"transfer leadership", func() error { _, err := c.TransferLeadership(ctx, "n1"); return err }},
		{"allow in coalesced batches", func() error {
			coalescing := client.NewWithOptions(client.Options{HTTPClient: &http.Client{Transport: tr, Timeout: 10 * time.Second}, Coalesce: true}, srv.URL)
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Go(func() {
					_, errs[i] = coalescing.Allow(ctx, client.AllowRequest{Key: fmt.Sprint("c", i), Limit: limit})
				})
			}
			wg.Wait()
			return errors.Join(errs...)
		}},
		{"block, list, be denied and lift", func() error {
			if _, err := c.PutBlock(ctx, "scraper", time.Hour, "scraping"); err != nil {
				return err
			}
			page, err := c.Blocks(ctx, "", 10)
			if err != nil {
				return err
			}
			if len(page.Blocks) != 1 || page.Blocks[0].Reason != "scraping" {
				return fmt.Errorf("listed %+v", page)
			}
			d, err := c.Allow(ctx, client.AllowRequest{Key: "scraper", Limit: limit})
			if err != nil {
				return err
			}
			if d.Allowed || d.Blocked == nil || d.Blocked.Reason != "scraping" {
				return fmt.Errorf("the blocked key was answered %+v", d)
			}
			_, err = c.DeleteBlock(ctx, "scraper")
			return err
		}},
		{"cluster", func() error { _, err := c.Cluster(ctx); return err }},
		{"ready", func() error { _, err := c.Ready(ctx); return err }},
	}
	for _, call := range calls {
		if err := call.call(); err != nil {
			t.Errorf("%s: %v", call.name, err)
		}
	}
	for _, op := range []string{"POST /v1/allow", "PUT /v1/policies/{name}", "POST /v1/leases", "POST /v1/leases/{id}/renew", "POST /v1/cluster/join", "DELETE /v1/cluster/nodes/{id}", "PUT /v1/blocks/{key}", "GET /v1/blocks", "DELETE /v1/blocks/{key}"} {
		if !tr.seen[op] {
			t.Errorf("the client never exchanged %s", op)
		}
	}
}
