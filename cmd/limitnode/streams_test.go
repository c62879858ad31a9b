package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/limitnode/limitnode/internal/testenv"
)

// h2From is an HTTPS client whose connections come from the local address
// from and speak HTTP/2, trusting the CA in caFile.
func h2From(t *testing.T, from, caFile string) *http.Client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(t, caFile)}, ForceAttemptHTTP2: true, DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestOneClientAddressCannotHoldMoreRequestsOverHTTP2 starts a node with
// TLS and a cap of 8 connections per client address. Over HTTP/1.1 a
// connection carries one request at a time, so the cap bounds a client's
// requests under way too; one HTTP/2 connection carries up to 250, so one
// address held 256 x 250 (5,000 of them stalled took a node from 22 to
// 174 MB). Now 8 requests under way over HTTP/2 from 127.0.0.1 (lease
// requests waiting in a queue) leave a ninth from it a 503, while
// 127.0.0.2 is served, and once they end 127.0.0.1 is served again.
func TestOneClientAddressCannotHoldMoreRequestsOverHTTP2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cli(t, "certs", "-dir", dir, "-nodes", "n1")
	ca := filepath.Join(dir, "ca.pem")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := startNode(t, ctx, []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", t.TempDir(),
		"-tls-cert", filepath.Join(dir, "n1.pem"), "-tls-key", filepath.Join(dir, "n1-key.pem"), "-max-conns-per-client", "8"}, nil)
	base := "https://" + node.addr
	first, second := h2From(t, "127.0.0.1", ca), h2From(t, "127.0.0.2", ca)
	do := func(ctx context.Context, c *http.Client, method, path, body string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.ProtoMajor != 2 {
			return 0, fmt.Errorf("the client spoke %s, want HTTP/2", resp.Proto)
		}
		return resp.StatusCode, nil
	}
	if status, err := do(ctx, first, "POST", "/v1/leases", `{"key":"slot","max":1,"ttl":"10m"}`); err != nil || status != http.StatusOK {
		t.Fatalf("the lease that fills the group: %d, %v", status, err)
	}

	waiting, stopWaiting := context.WithCancel(ctx)
	var waiters sync.WaitGroup
	for range 8 {
		waiters.Go(func() {
			_, _ = do(waiting, first, "POST", "/v1/leases", `{"key":"slot","max":1,"ttl":"10m","max_wait":"10m","max_queue":100}`)
		})
	}
	testenv.WaitFor(t, "8 requests from 127.0.0.1 to wait in the lease queue", func() bool {
		req, _ := http.NewRequest("GET", base+"/v1/leases?key=slot", nil)
		resp, err := second.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return strings.Count(string(data), `"position"`) == 8
	})
	if status, err := do(ctx, first, "GET", "/v1/cluster", ""); err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("a ninth request from 127.0.0.1 over HTTP/2: %d, %v; want a 503", status, err)
	}
	if status, err := do(ctx, second, "GET", "/v1/cluster", ""); err != nil || status != http.StatusOK {
		t.Fatalf("a request from 127.0.0.2 over HTTP/2: %d, %v; want a 200", status, err)
	}
	stopWaiting()
	waiters.Wait()
	testenv.WaitFor(t, "127.0.0.1 to be served again once its requests ended", func() bool {
		status, err := do(ctx, first, "GET", "/v1/cluster", "")
		return err == nil && status == http.StatusOK
	})
}
