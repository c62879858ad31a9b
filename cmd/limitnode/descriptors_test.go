package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestCapsFitTheDescriptorLimit: the caps left at their defaults are
// lowered so that both client ports and the Raft port fit beside the
// reserved descriptors; caps the operator gave are kept and warned about.
func TestCapsFitTheDescriptorLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		limit       uint64
		grpc        bool
		change      func(*config)
		wantWarning string
		fits        bool
	}{
		{name: "a large limit changes nothing", limit: 1 << 20, grpc: true, fits: true},
		{name: "an unknown limit changes nothing", limit: 0},
		{name: "the defaults fit a limit of 20,000 without gRPC", limit: 20000, fits: true},
		{name: "with gRPC they are lowered", limit: 20000, grpc: true, wantWarning: "lowered them to fit", fits: true},
		{name: "a given Raft cap is kept, the HTTP one lowered", limit: 4096, grpc: true, change: func(c *config) { c.maxRaftConns = connCap{n: 2000, set: true} },
			wantWarning: "lowered them to fit", fits: true},
		{name: "a given HTTP cap is kept, the Raft one lowered", limit: 4096, change: func(c *config) { c.maxHTTPConns = connCap{n: 3000, set: true} },
			wantWarning: "lowered them to fit", fits: true},
		{name: "given caps are kept", limit: 4096, change: func(c *config) {
			c.maxHTTPConns, c.maxRaftConns = connCap{n: 5000, set: true}, connCap{n: 1024, set: true}
		}, wantWarning: "can need more file descriptors than RLIMIT_NOFILE allows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := defaultConfig(tt.change)
			if tt.grpc {
				c.grpcAddr = "127.0.0.1:0"
			}
			before := c
			var logs bytes.Buffer
			c.fitDescriptors(tt.limit, slog.New(slog.NewTextHandler(&logs, nil)))
			if tt.wantWarning == "" {
				if c != before || logs.Len() > 0 {
					t.Fatalf("changed %+v to %+v, logged %q", before, c, logs.String())
				}
				return
			}
			if !strings.Contains(logs.String(), tt.wantWarning) || !strings.Contains(logs.String(), "rlimit_nofile=") {
				t.Fatalf("logged %q, want a warning %q naming the limit", logs.String(), tt.wantWarning)
			}
			ports := 1
			if tt.grpc {
				ports = 2
			}
			needed := uint64(c.maxHTTPConns.n*ports + c.maxRaftConns.n + reservedDescriptors)
			if (needed <= tt.limit) != tt.fits {
				t.Fatalf("caps %+v need %d descriptors of %d", c, needed, tt.limit)
			}
			for _, given := range []struct{ before, after connCap }{{before.maxHTTPConns, c.maxHTTPConns}, {before.maxRaftConns, c.maxRaftConns}} {
				if given.before.set && given.after != given.before {
					t.Fatalf("a given cap changed from %v to %v", given.before, given.after)
				}
			}
			if !before.maxHTTPConns.set && c.maxConnsPerClient.n > c.maxHTTPConns.n/4 {
				t.Fatalf("-max-conns-per-client %d over a quarter of the lowered -max-http-conns %d", c.maxConnsPerClient.n, c.maxHTTPConns.n)
			}
		})
	}
}
