package testenv

import "time"

// TB is the part of testing.TB these helpers use, so that a program that
// is not a test (cmd/limitbench starts test clusters) can call them too.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// WaitTimeout bounds each wait of a test for something its servers do on
// their own: a leader elected, a member caught up, a port served. It is no
// measure of speed (a wait ends as soon as what it waits for holds); it is
// six times the 5 s a cluster gives one request, so that a wait outlasts a
// failover and a request that times out and is tried again, on a loaded
// 2-core machine with the race detector.
const WaitTimeout = 30 * time.Second

// pollInterval is how often WaitFor asks.
const pollInterval = 20 * time.Millisecond

// WaitFor asks cond every pollInterval until it holds, and fails t, naming
// what it waited for, once WaitTimeout has passed: the module's tests wait
// for something to happen with it, rather than sleep for as long as they
// guess it takes.
func WaitFor(t TB, what string, cond func() bool) {
	t.Helper()
	WaitForWithin(t, WaitTimeout, what, cond)
}

// WaitForWithin is WaitFor for something whose time is not the servers'
// own but another's they wait on (a peer's backoff, say), given as within.
func WaitForWithin(t TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(pollInterval) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
	}
}
