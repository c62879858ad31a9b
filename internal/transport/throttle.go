package transport

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// refusalLogEvery is how often, at most, one kind of refusal of one peer is
// logged: a scanner, a node of another cluster or a client with the wrong
// certificate retries many times a second, and each line would say the
// same.
const refusalLogEvery = 10 * time.Second

// maxThrottledPeers bounds the peers whose refusals are counted apart; past
// it, the others share one count, so that connections from many addresses
// cannot grow the table.
const maxThrottledPeers = 1024

// throttle logs a refusal once per peer and kind per refusalLogEvery, with
// the count of those held back since the last line (as package cluster
// does for Raft's complaints about a peer).
type throttle struct {
	logger *slog.Logger
	now    func() time.Time

	mu   sync.Mutex
	last map[throttleKey]*throttled
}

type throttleKey struct{ kind, peer string }

type throttled struct {
	at         time.Time
	suppressed int
}

func newThrottle(logger *slog.Logger) *throttle {
	return &throttle{logger: logger, now: time.Now, last: make(map[throttleKey]*throttled)}
}

// warn logs msg about the connection's peer at WARN unless the same kind was
// logged for that peer (its host: every connection has a new port) within
// refusalLogEvery.
func (t *throttle) warn(kind string, remote net.Addr, msg string, args ...any) {
	peer := remote.String()
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host
	}
	suppressed, ok := t.admit(throttleKey{kind, peer})
	if !ok {
		return
	}
	args = append(args, "remote", remote.String())
	if suppressed > 0 {
		args = append(args, "repeats_suppressed", suppressed, "over", refusalLogEvery)
	}
	t.logger.Warn(msg, args...)
}

func (t *throttle) admit(key throttleKey) (int, bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.last[key]
	if r == nil && len(t.last) >= maxThrottledPeers {
		for k, old := range t.last {
			if now.Sub(old.at) >= refusalLogEvery {
				delete(t.last, k)
			}
		}
		if len(t.last) >= maxThrottledPeers {
			key.peer = "(many peers)"
			r = t.last[key]
		}
	}
	if r != nil && now.Sub(r.at) < refusalLogEvery {
		r.suppressed++
		return 0, false
	}
	suppressed := 0
	if r != nil {
		suppressed = r.suppressed
	}
	t.last[key] = &throttled{at: now}
	return suppressed, true
}
