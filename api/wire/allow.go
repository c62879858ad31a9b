package wire

// Limit is a limit as the API spells it: the algorithm (default
// token_bucket), the rate per period (a Go duration, default 1s) and, for
// the bucket algorithms and GCRA, the burst (default the rate). An inline
// limit of /v1/allow may have LocalShares (a policy has its own).
type Limit struct {
	Algorithm   string       `json:"algorithm,omitempty"`
	Rate        *int64       `json:"rate"`
	Period      *string      `json:"period,omitempty"`
	Burst       *int64       `json:"burst,omitempty"`
	LocalShares *LocalShares `json:"local_shares,omitempty"`
}

// LocalShares lets nodes decide a key from shares of its budget: each
// share lasts TTL (a Go duration, default 500ms) and holds at most MaxUnits
// (default an eighth of the limit's capacity). {} means the defaults.
type LocalShares struct {
	TTL      *string `json:"ttl,omitempty"`
	MaxUnits *int64  `json:"max_units,omitempty"`
}

// Check is one check of a multi-check request: a key and a limit, or a
// policy (with its dimensions when its key is a template), and a cost
// (default 1).
type Check struct {
	Key        string            `json:"key,omitempty"`
	Limit      *Limit            `json:"limit,omitempty"`
	Cost       *int64            `json:"cost,omitempty"`
	Policy     *string           `json:"policy,omitempty"`
	Dimensions map[string]string `json:"dimensions,omitempty"`
}

// AllowRequest is the body of POST /v1/allow: one check inline (key, limit
// or policy, cost, dimensions), or several under Checks, decided together.
type AllowRequest struct {
	Key        string            `json:"key,omitempty"`
	Limit      *Limit            `json:"limit,omitempty"`
	Cost       *int64            `json:"cost,omitempty"`
	Policy     *string           `json:"policy,omitempty"`
	Dimensions map[string]string `json:"dimensions,omitempty"`
	RequestID  string            `json:"request_id,omitempty"`
	Checks     []Check           `json:"checks,omitempty"`
	// MaxWait admits a request of the bucket algorithms now, as a
	// reservation, when it would be admitted within it; Hold makes the
	// node wait the reservation out before it answers.
	MaxWait *string `json:"max_wait,omitempty"`
	Hold    bool    `json:"hold,omitempty"`
	// Settle charges the admission its cost up front, to settle
	// (POST /v1/settle) with what the request used within TTL.
	Settle *SettleOptions `json:"settle,omitempty"`
	// TakeShare asks, with one check, for a share of its budget for the
	// caller to spend itself (the answer's Share).
	TakeShare *ShareAsk `json:"take_share,omitempty"`
}

// SettleOptions is the settle option of an allow request: how long the
// settlement waits to be settled (a Go duration).
type SettleOptions struct {
	TTL *string `json:"ttl"`
}

// ShareAsk asks for a share of up to Units, lasting TTL (a Go duration,
// default 500ms).
type ShareAsk struct {
	Units *int64  `json:"units"`
	TTL   *string `json:"ttl,omitempty"`
}

// Share is a share granted to the caller: ID (opaque: it names the share
// and proves the caller holds it, for POST /v1/shares/return) and Units it
// may spend for SpendForMS after it sent its request; Remaining is what the
// key had left for everyone else.
type Share struct {
	ID         string `json:"id"`
	Units      int64  `json:"units"`
	SpendForMS int64  `json:"spend_for_ms"`
	Remaining  int64  `json:"remaining"`
}

// ShareReturn is the body of POST /v1/shares/return: the share's key (one
// check, as in an allow request, without cost), its ID and what is left.
// Background says no caller waits for the answer (a holder giving back a
// share it retired): it is answered as soon as it is applied, not once
// the deny leases it could contradict have ended.
type ShareReturn struct {
	Key        string            `json:"key,omitempty"`
	Limit      *Limit            `json:"limit,omitempty"`
	Policy     *string           `json:"policy,omitempty"`
	Dimensions map[string]string `json:"dimensions,omitempty"`
	ID         string            `json:"id"`
	Unspent    int64             `json:"unspent"`
	Background bool              `json:"background,omitempty"`
}

// ShareReturned answers POST /v1/shares/return: the units given back (0
// when the share had ended or is unknown).
type ShareReturned struct {
	Returned int64 `json:"returned"`
}

// AllowResponse is the body of a /v1/allow answer (200 or 429).
type AllowResponse struct {
	Allowed      bool  `json:"allowed"`
	Limit        int64 `json:"limit"`
	Remaining    int64 `json:"remaining"`
	ResetAfterMS int64 `json:"reset_after_ms"`
	RetryAfterMS int64 `json:"retry_after_ms"`
	// WaitMS, for a request admitted by reservation (max_wait), is how
	// long the caller must wait before going on; HeldMS, with hold, how
	// long the node waited for it instead.
	WaitMS int64 `json:"wait_ms,omitempty"`
	HeldMS int64 `json:"held_ms,omitempty"`
	// Duplicate is true when the request ID was seen before: the answer is
	// the first decision, and nothing was consumed now.
	Duplicate bool            `json:"duplicate,omitempty"`
	Checks    []CheckResponse `json:"checks,omitempty"`
	// Blocked, for a request denied because a key is blocked, says so and
	// why.
	Blocked *Blocked `json:"blocked,omitempty"`
	// DeniedBy, for a denial, says what denied it.
	DeniedBy *DeniedBy `json:"denied_by,omitempty"`
	// SettlementID, for an admission with settle, names the settlement
	// to settle.
	SettlementID string `json:"settlement_id,omitempty"`
	// Share is the share granted to TakeShare, if any.
	Share *Share `json:"share,omitempty"`
}

// CheckResponse reports one check, when a request has several or one of
// them is a policy in shadow mode.
type CheckResponse struct {
	Key          string `json:"key"`
	Policy       string `json:"policy,omitempty"`
	Shadow       bool   `json:"shadow,omitempty"`
	Allowed      bool   `json:"allowed"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	RetryAfterMS int64  `json:"retry_after_ms"`
}

// BatchRequest is the body of POST /v1/allow/batch: independent requests.
type BatchRequest struct {
	Requests []AllowRequest `json:"requests"`
}

// BatchItem is one answer of a batch, in the order of the requests: an
// allow response or an error, with the status it would have had alone.
type BatchItem struct {
	Status int `json:"status"`
	*AllowResponse
	*Error
}

// BatchResponse is the body of a /v1/allow/batch answer.
type BatchResponse struct {
	Responses []BatchItem `json:"responses"`
}

// DeniedBy, in a denial, says what denied it: the check (its index), the
// policy it was decided under (absent for an inline limit) and that
// policy's version (the log index of its last change), the limit that
// applied, and the cause: "limit", "block" or "penalty".
type DeniedBy struct {
	Check         int    `json:"check"`
	Policy        string `json:"policy,omitempty"`
	PolicyVersion uint64 `json:"policy_version,omitempty"`
	Limit         Limit  `json:"limit"`
	Cause         string `json:"cause"`
}

// SettleRequest is the body of POST /v1/settle: the settlement, and what
// the request used.
type SettleRequest struct {
	SettlementID string `json:"settlement_id"`
	Cost         *int64 `json:"cost"`
}

// Settlement is the answer of POST /v1/settle: the cost charged up front
// (Upfront, "reserved") and
// settled, what was given back (refunded) or charged beyond the
// up-front charge (charged; what the debt bound left out, forgiven), each the
// least over the request's checks; when a check is left in debt,
// retry_after_ms is how long until it admits again. Duplicate: the same
// settlement was made before, and this is its answer.
type Settlement struct {
	SettlementID string `json:"settlement_id"`
	Upfront      int64  `json:"reserved"`
	Cost         int64  `json:"cost"`
	Refunded     int64  `json:"refunded"`
	Charged      int64  `json:"charged"`
	Forgiven     int64  `json:"forgiven,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	Duplicate    bool   `json:"duplicate,omitempty"`
}
