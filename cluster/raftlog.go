package cluster

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// newRaftLogger routes hashicorp/raft's hclog output into slog, keeping only
// records at level and above ("warn" when empty: Raft's debug and info
// records are many and rarely useful to an operator).
func newRaftLogger(logger *slog.Logger, level string) hclog.Logger {
	lvl := hclog.LevelFromString(level)
	if lvl == hclog.NoLevel {
		lvl = hclog.Warn
	}
	intercept := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Level: lvl, Output: io.Discard})
	intercept.RegisterSink(&slogSink{logger: logger, level: lvl})
	return intercept
}

type slogSink struct {
	logger *slog.Logger
	level  hclog.Level
}

func (s *slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	if level < s.level {
		return
	}
	var slogLevel slog.Level
	switch {
	case level >= hclog.Error:
		slogLevel = slog.LevelError
	case level == hclog.Warn:
		slogLevel = slog.LevelWarn
	case level == hclog.Info:
		slogLevel = slog.LevelInfo
	default:
		slogLevel = slog.LevelDebug
	}
	s.logger.Log(context.Background(), slogLevel, strings.TrimSpace(msg), append([]any{"component", name}, args...)...)
}
