package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
)

// TestANodeIsReadyOnceItsSeedIsStored starts a node with -policies and
// -rls-config and asks /readyz from the moment it serves, as a script's
// ready loop or a readiness probe would: the first 200 comes once the
// policy and the domain are stored, so what is asked next finds them. (It
// used to be ready as soon as it led, a write before the seed was in: the
// Envoy page's `rls list` right after `ready` printed nothing now and
// then on a loaded machine.)
func TestANodeIsReadyOnceItsSeedIsStored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policies, domains := filepath.Join(dir, "policies.json"), filepath.Join(dir, "edge.yaml")
	if err := os.WriteFile(policies, []byte(`{"policies": {"per-key": {"limit": {"rate": 2, "period": "1h"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(domains, []byte("domain: edge\ndescriptors:\n  - key: client\n    rate_limit: {unit: minute, requests_per_unit: 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		addrFile := newAddrFile(t)
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data", string(rune('a'+round))),
				"-policies", policies, "-rls-config", domains, "-addr-file", addrFile}, env(nil), io.Discard, nil)
		}()
		var addrs boundAddrs
		testenv.WaitFor(t, "the node to write its addresses", func() bool {
			var ok bool
			addrs, ok = readAddrFile(t, addrFile)
			return ok
		})
		url := "http://" + addrs.HTTP
		for deadline := time.Now().Add(testenv.WaitTimeout); ; {
			if resp, err := http.Get(url + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("the node never became ready")
			}
		}
		c := client.New(nil, addrs.HTTP)
		if _, err := c.GetPolicy(ctx, "per-key"); err != nil {
			t.Fatalf("round %d: ready, and the seeded policy: %v", round, err)
		}
		if list, err := c.ListRLSDomains(ctx); err != nil || !strings.Contains(strings.Join(list, ","), "edge") {
			t.Fatalf("round %d: ready, and the domains: %v %v", round, list, err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
