package health

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestAFollowerTrailsOnlyBehindWhatTheLeaderHadAppliedLongAgo: a follower
// is told it trails when, by now, it has not applied what the leader had
// applied maxReadyLag ago; what the leader applied lately is not owed yet.
func TestAFollowerTrailsOnlyBehindWhatTheLeaderHadAppliedLongAgo(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name    string
		samples []progressSample
		applied uint64
		trails  bool
	}{
		{"no ping yet owes nothing", nil, 0, false},
		{"a recent ping owes nothing yet", []progressSample{{100, now.Add(-time.Second)}}, 0, false},
		{"an old ping not caught up with trails", []progressSample{{100, now.Add(-maxReadyLag - time.Second)}}, 99, true},
		{"an old ping caught up with keeps up", []progressSample{{100, now.Add(-maxReadyLag - time.Second)}, {500, now}}, 100, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Progress
			for _, s := range tt.samples {
				p.Note(s.index, s.at)
			}
			if got := p.Trailing(tt.applied); (got != "") != tt.trails {
				t.Fatalf("Trailing(%d) = %q, want trailing %v", tt.applied, got, tt.trails)
			}
		})
	}
}

// TestANodeWithoutALeaderNamesTheVotersItWaitsFor: with fewer voters
// answering than a quorum, the reason names the silent ones; with a quorum
// answering, an election is under way.
func TestANodeWithoutALeaderNamesTheVotersItWaitsFor(t *testing.T) {
	servers := []raft.Server{
		{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:1"},
		{Suffrage: raft.Voter, ID: "n2", Address: "127.0.0.1:2"},
		{Suffrage: raft.Voter, ID: "n3", Address: "127.0.0.1:3"},
		{Suffrage: raft.Nonvoter, ID: "n4", Address: "127.0.0.1:4"},
	}
	tests := []struct {
		name   string
		silent []string
		want   string
	}{
		{"a quorum answers", []string{"n3"}, "an election is under way"},
		{"no quorum answers", []string{"n2", "n3"}, "waiting for a quorum of 2 of the 3 voters; not answering: n2 at 127.0.0.1:2, n3 at 127.0.0.1:3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q Quorum
			if got := q.NoLeaderReason(); got != "no leader known" {
				t.Fatalf("before a probe: %q", got)
			}
			q.Probe(servers, func(voters []raft.Server) []raft.Server {
				if len(voters) != 3 {
					t.Fatalf("probed %d servers, want the 3 voters", len(voters))
				}
				var silent []raft.Server
				for _, v := range voters {
					for _, id := range tt.silent {
						if string(v.ID) == id {
							silent = append(silent, v)
						}
					}
				}
				return silent
			})
			if got := q.NoLeaderReason(); !strings.Contains(got, tt.want) {
				t.Fatalf("NoLeaderReason() = %q, want it to say %q", got, tt.want)
			}
		})
	}
}

// TestTheDiskProbeSaysWhenTheDirectoryIsGone: a probe of a writable
// directory succeeds, and one of a directory that was removed fails.
func TestTheDiskProbeSaysWhenTheDirectoryIsGone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := NewDisk(dir, slog.New(slog.DiscardHandler))
	d.Probe()
	if err := d.Err(); err != nil {
		t.Fatalf("probe of a writable directory: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	d.Probe()
	if err := d.Err(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("probe of a removed directory: %v, want a not-exist error", err)
	}
}

// TestAFollowerKeepsWhatTheLeaderSaidOfItsState: the view a follower
// receives sets its divergence, and a later view in which it agrees clears
// it.
func TestAFollowerKeepsWhatTheLeaderSaidOfItsState(t *testing.T) {
	v := NewView("n2", slog.New(slog.DiscardHandler))
	v.Receive([]Member{{ID: "n1"}, {ID: "n2", DivergedAt: 42}})
	if got := v.DivergedAt(); got != 42 {
		t.Fatalf("DivergedAt() = %d, want 42", got)
	}
	v.Receive([]Member{{ID: "n1"}, {ID: "n2", AgreedAt: 50}})
	if got := v.DivergedAt(); got != 0 {
		t.Fatalf("DivergedAt() = %d after agreeing, want 0", got)
	}
}
