// Package clusterclock decides the time a leader stamps on the entries it
// appends, so that a leader whose wall clock is wrong moves cluster time at
// the speed of real time, and gives each node its reading of cluster time
// between entries. It reads clocks and holds no Raft: the node feeds it the
// stamps it applies and asks it for the next one.
package clusterclock

import (
	"sync"
	"time"
)

// Clock decides the time a leader stamps on each batch, so that a
// leader whose wall clock is wrong can neither refund tokens (by stamping a
// time in the past) nor mint them (by stamping one in the future).
//
// The rule: when a node starts leading, it estimates the cluster time from
// the last stamped entry it saw applied while this process ran, plus the real time
// (monotonic clock) elapsed since. During its term it stamps its wall clock,
// but clamped below to that estimate less the maximum step
// (Config.MaxClockStep), and above to the estimate plus what the term has
// lasted times MaxClockRate (never more than the step):
//
//	estimate = cluster time at takeover + monotonic time since takeover
//	stamp    = clamp(wall clock, estimate − step, estimate + min(step, term's age × MaxClockRate))
//
// and the FSM then takes max(stamp, last applied time). A leader whose clock
// is minutes fast therefore moves cluster time at the speed of real time,
// catching up at a hundredth of it and at most a second ahead; one whose
// clock is minutes slow moves it at the speed of real time, at most a second
// behind, instead of freezing refills until its clock catches up. Cluster
// time never jumps ahead at a change of leader: a deny lease's holder,
// which times it on its own monotonic clock, needs that. With a correct
// clock the stamp is the wall clock.
//
// Entries replayed from disk at start-up say nothing about how much time has
// passed since, so they are not used: after a restart of the whole cluster
// the first leader starts from its wall clock (never below the last applied
// time). That one moment trusts a wall clock; NTP is assumed there.
type Clock struct {
	wall         func() time.Time
	step         time.Duration
	rate         float64 // Config.MaxClockRate
	startupIndex uint64  // the last log index when this process opened
	// ceiling is the latest time the state machine accepts from an entry
	// of a term (fsm.FSM.StampCeiling): how far one entry may move time.
	ceiling func(term uint64) int64

	mu sync.Mutex
	// The latest applied entry stamped after this process started.
	observedNanos int64
	observedAt    time.Time // monotonic reading
	observed      bool
	// The estimate fixed when this node's current term as leader began.
	term       uint64
	termNanos  int64
	termAt     time.Time
	termActive bool
}

// New returns the clock of a node whose wall clock is wall, bounded by
// step (Config.MaxClockStep) and rate (Config.MaxClockRate), opened on a
// log whose last index was startupIndex; ceiling is the latest time the
// state machine accepts from an entry of a term (fsm.FSM.StampCeiling).
func New(wall func() time.Time, step time.Duration, rate float64, startupIndex uint64, ceiling func(term uint64) int64) *Clock {
	return &Clock{wall: wall, step: step, rate: rate, startupIndex: startupIndex, ceiling: ceiling}
}

// Observe records an applied stamped entry (allow batch or lease): its index
// and its cluster time.
func (c *Clock) Observe(index uint64, nowNanos int64) {
	if index <= c.startupIndex {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observedNanos, c.observedAt, c.observed = nowNanos, time.Now(), true
}

// Estimate is this node's reading of cluster time now: the latest stamped
// entry it saw applied plus the real time since, or 0 before it saw one
// (the caller then reads the applied time). It is for showing state (how
// long a lease has left), never for deciding.
func (c *Clock) Estimate() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.observed {
		return 0
	}
	return c.observedNanos + int64(time.Since(c.observedAt))
}

// Stamp returns the time to stamp on a batch appended in raft term term.
// lastApplied is the FSM's latest time, used when nothing has been observed.
func (c *Clock) Stamp(term uint64, lastApplied int64) int64 {
	stamp := c.clamped(term, lastApplied)
	// The ceiling takes the state machine's lock, which Apply holds while
	// it calls Observe: it is read outside c.mu, so the two locks are never
	// taken in the opposite order.
	return min(stamp, c.ceiling(term))
}

// clamped is the wall clock clamped to this term's estimate of cluster time.
func (c *Clock) clamped(term uint64, lastApplied int64) int64 {
	now := time.Now()
	wall := c.wall().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.termActive || c.term != term {
		c.term, c.termAt, c.termActive = term, now, true
		if c.observed {
			c.termNanos = c.observedNanos + int64(now.Sub(c.observedAt))
		} else {
			c.termNanos = max(wall, lastApplied)
		}
	}
	inTerm := now.Sub(c.termAt)
	estimate := c.termNanos + int64(inTerm)
	// Ahead of the estimate only by what the term has lasted times the
	// rate: cluster time never runs faster than real time by more than
	// that (a deny lease, timed on its holder's monotonic clock, relies
	// on it); behind, by up to a step at once.
	ahead := min(c.step, time.Duration(float64(inTerm)*c.rate))
	return min(max(wall, estimate-int64(c.step)), estimate+int64(ahead))
}

// idleFor is how long ago this node saw the latest stamped entry applied,
// or ok false when it has seen none since it started.
func (c *Clock) idleFor() (d time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.observed {
		return 0, false
	}
	return time.Since(c.observedAt), true
}

// tickEvery is how long a leader lets the cluster go without a stamped
// entry before it appends a tick (a CommandLeaseTick, which changes nothing
// but time): so that no entry of its term needs to move time by more than
// fsm.MaxStepInTerm, which an idle hour would.
const tickEvery = 10 * time.Minute

// TickDue reports whether a leader should append a tick now: no stamped
// entry has been applied for tickEvery, or none since this process
// restarted on a log. After a restart of every node, the first leader's
// tick brings every node's reading of cluster time (Estimate) to now
// within a second, instead of the last stamp before the restart.
func (c *Clock) TickDue() bool {
	idle, seen := c.idleFor()
	if !seen {
		return c.startupIndex > 0
	}
	return idle >= tickEvery
}
