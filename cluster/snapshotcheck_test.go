package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
)

// TestADamagedNewestSnapshot: a byte changed in a stopped node's newest
// snapshot used to make every start panic ("log not found") when the log
// no longer held the entries after the snapshot before it. Now a node
// whose log still holds them starts from the older snapshot with the whole
// state, and one whose log does not stops at Open with one error naming the
// damaged snapshot.
func TestADamagedNewestSnapshot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		trailingLogs uint64
		wantErr      bool
	}{
		{"the log holds the entries after the older snapshot", 1000, false},
		{"the log was compacted into the damaged snapshot", 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := cluster.Config{ID: "n1", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(), Bootstrap: true, TrailingLogs: tt.trailingLogs}
			n, err := cluster.Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, "the node to lead", n.IsLeader)
			limit := algorithms.Limit{Rate: 5, Period: time.Hour, Burst: 5}
			for round := range 2 {
				for i := range 20 {
					if _, err := n.Allow(context.Background(), contract.Request{Checks: []contract.Check{{Key: fmt.Sprint("k", round, "-", i), Limit: limit, Cost: 1}}}); err != nil {
						t.Fatal(err)
					}
				}
				if err := n.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
			snaps, err := filepath.Glob(filepath.Join(cfg.DataDir, "snapshots", "*"))
			if err != nil || len(snaps) != 2 {
				t.Fatalf("snapshots %v, %v; want two", snaps, err)
			}
			newest := slices.Max(snaps) // named term-index-time
			state := filepath.Join(newest, "state.bin")
			data, err := os.ReadFile(state)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0xFF
			if err := os.WriteFile(state, data, 0o600); err != nil {
				t.Fatal(err)
			}

			n, err = cluster.Open(cfg)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), filepath.Base(newest)) || strings.Count(err.Error(), "\n") > 0 {
					t.Fatalf("Open on a damaged snapshot the log cannot stand in for: %v, want one line naming it", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open on a damaged snapshot the log can stand in for: %v", err)
			}
			defer n.Close()
			testenv.WaitFor(t, "the node to lead again", n.IsLeader)
			testenv.WaitFor(t, "the whole state to be back", func() bool { return n.Status().Keys == 40 })
		})
	}
}
