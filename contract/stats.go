package contract

// Stats is what a node has seen decided lately: every node applies every
// decision, so any node can tell (once it has caught up).
type Stats struct {
	// NowNanos is the cluster time of the latest decision recorded.
	NowNanos int64
	// Seconds has the allowed and denied requests of each of the last
	// StatsHistorySeconds seconds of cluster time, oldest first; a second
	// without decisions is zero.
	Seconds []SecondCount
	// TopDeniedKeys and TopDeniedPolicies are the keys and policies with
	// the most denied checks in the last StatsTopWindowSeconds seconds,
	// most first. A count may exceed the truth by at most its Error, and
	// Error is at most TopErrorBound; a key denied more than TopErrorBound
	// times is listed as long as the list is long enough to reach it
	// (space-saving's guarantee), and it ranks before any key denied
	// TopErrorBound times fewer than it.
	TopDeniedKeys     []TopCount
	TopDeniedPolicies []TopCount
	// TopErrorBound is the sum over the window's 10-second slots of each
	// slot's denied checks divided by StatsTopCounters: at most the
	// window's denials divided by StatsTopCounters.
	TopErrorBound int64
	// Dropped counts applied entries the recorder skipped because it fell
	// behind (its queue was full); they are missing from the counts.
	Dropped int64
	// Shares are the shares of keys' budgets outstanding in the state
	// this node applied, per policy (see LocalShares).
	Shares []ShareCount
}

// ShareCount is what the keys of one policy (Policy "" for inline limits)
// have outstanding in shares: how many shares, and their units.
type ShareCount struct {
	Policy string
	Shares int
	Units  int64
}

// SecondCount is the requests decided in one second of cluster time.
type SecondCount struct {
	UnixSecond int64
	Allowed    int64
	Denied     int64
}

// TopCount is one heavy hitter: a key or policy and how often it was
// denied, over-counted by at most Error.
type TopCount struct {
	Name  string
	Count int64
	Error int64
}

// Bounds of the statistics.
const (
	// StatsHistorySeconds is how far back Stats.Seconds goes: 10 minutes.
	StatsHistorySeconds = 600
	// StatsTopWindowSeconds is the window of the top denied keys and
	// policies: the last minute.
	StatsTopWindowSeconds = 60
	// StatsTopCounters is how many keys (and, apart, policies) the
	// heavy-hitters sketch of each 10-second slot tracks.
	StatsTopCounters = 1024
)
