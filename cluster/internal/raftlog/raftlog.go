// Package raftlog passes hashicorp/raft's log records into log/slog, at the
// levels an operator of a healthy cluster expects.
package raftlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// New routes hashicorp/raft's hclog output into slog, keeping only
// records at level and above ("warn" when empty: Raft's debug and info
// records are many and rarely useful to an operator). Raft's records of
// what a healthy cluster does (elections at start, a follower catching up)
// are passed at info or debug, not as the warnings Raft files them as, and
// its complaints about an unreachable peer, which it repeats several times a
// second, are passed once per peer per peerErrorEvery, with a count.
func New(logger *slog.Logger, level string) hclog.Logger {
	lvl := hclog.LevelFromString(level)
	if lvl == hclog.NoLevel {
		lvl = hclog.Warn
	}
	intercept := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Level: hclog.Off, Output: io.Discard})
	intercept.RegisterSink(&slogSink{logger: logger, level: levelOf(lvl), last: map[string]*repeated{}, now: time.Now})
	return intercept
}

// peerErrorEvery is how often, at most, a repeated complaint about one peer
// is logged.
const peerErrorEvery = 10 * time.Second

// expectedLevels are the levels of Raft's records about what a healthy
// cluster does, by message.
var expectedLevels = map[string]slog.Level{
	"heartbeat timeout reached, starting election":  slog.LevelInfo,
	"Election timeout reached, restarting election": slog.LevelInfo,
	"no known peers, aborting election":             slog.LevelDebug,
	"failed to get previous log":                    slog.LevelDebug,
	"appendEntries rejected, sending older logs":    slog.LevelDebug,
	"failed to decode incoming command":             slog.LevelDebug,
}

// peerComplaints are Raft's records about a peer it cannot reach, which it
// repeats on every retry; they are logged as warnings, once per peer per
// peerErrorEvery.
var peerComplaints = map[string]bool{
	"failed to appendEntries to":       true,
	"failed to heartbeat to":           true,
	"failed to make requestVote RPC":   true,
	"failed to contact":                true,
	"failed to pipeline appendEntries": true,
}

type repeated struct {
	at         time.Time
	suppressed int
}

type slogSink struct {
	logger *slog.Logger
	level  slog.Level
	now    func() time.Time

	mu   sync.Mutex
	last map[string]*repeated
}

func levelOf(l hclog.Level) slog.Level {
	switch {
	case l >= hclog.Error:
		return slog.LevelError
	case l == hclog.Warn:
		return slog.LevelWarn
	case l == hclog.Info:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}

func (s *slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	msg = strings.TrimSpace(msg)
	lvl := levelOf(level)
	if expected, ok := expectedLevels[msg]; ok {
		lvl = expected
	}
	if peerComplaints[msg] {
		lvl = slog.LevelWarn
		if lvl < s.level {
			return
		}
		suppressed, ok := s.admit(msg, args)
		if !ok {
			return
		}
		if suppressed > 0 {
			args = append(args, "repeats_suppressed", suppressed, "over", peerErrorEvery)
		}
	}
	if lvl < s.level {
		return
	}
	s.logger.Log(context.Background(), lvl, msg, append([]any{"component", name}, args...)...)
}

// admit says whether a complaint about a peer may be logged now, and how
// many like it were held back since the last one.
func (s *slogSink) admit(msg string, args []any) (int, bool) {
	key := msg + "|" + peerOf(args)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.last[key]
	if r != nil && now.Sub(r.at) < peerErrorEvery {
		r.suppressed++
		return 0, false
	}
	suppressed := 0
	if r != nil {
		suppressed = r.suppressed
	}
	s.last[key] = &repeated{at: now}
	return suppressed, true
}

// peerOf finds the peer a record is about among hclog's key-value args.
func peerOf(args []any) string {
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "peer", "target", "server-id":
			return fmt.Sprint(args[i+1])
		}
	}
	return ""
}
