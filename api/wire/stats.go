package wire

// Stats is the body of GET /v1/stats: what the cluster decided lately, as
// the answering node has applied it.
type Stats struct {
	Version     string         `json:"version"`
	Cluster     Cluster        `json:"cluster"`
	NowMS       int64          `json:"now_unix_ms"`
	Seconds     []Second       `json:"decisions_per_second"`
	TopKeys     []Top          `json:"top_denied_keys"`
	TopPolicies []Top          `json:"top_denied_policies"`
	ErrorBound  int64          `json:"top_error_bound"`
	Dropped     int64          `json:"dropped_entries"`
	Policies    []ShadowPolicy `json:"shadow_policies"`
	Shares      []Shares       `json:"local_shares"`
	// RecentChanges are the last changes operators made, newest first.
	RecentChanges []AuditEntry `json:"recent_changes"`
	// Blocked is the block list at a glance.
	Blocked BlockedKeys `json:"blocked_keys"`
}

// Shares is what the keys of one policy ("" for inline limits) have
// outstanding in local shares.
type Shares struct {
	Policy string `json:"policy"`
	Shares int    `json:"shares"`
	Units  int64  `json:"units"`
}

// BlockedKeys is how many keys are blocked now, how many by a penalty, and
// the blocks that began last.
type BlockedKeys struct {
	Count     int     `json:"count"`
	ByPenalty int     `json:"by_penalty"`
	Latest    []Block `json:"latest"`
}

// Second is the decisions of one second of cluster time.
type Second struct {
	UnixSecond int64 `json:"t"`
	Allowed    int64 `json:"allowed"`
	Denied     int64 `json:"denied"`
}

// Top is one heavy hitter: its name, its count and the count's error bound.
type Top struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
	Error int64  `json:"error"`
}

// ShadowPolicy is a policy in (or lately out of) shadow mode, with the
// denials it would have made.
type ShadowPolicy struct {
	Name         string `json:"name"`
	Shadow       bool   `json:"shadow"`
	ShadowDenied int64  `json:"shadow_denied"`
}
