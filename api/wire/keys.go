package wire

// KeyState is the body of GET /v1/keys/{key}, and one key of a KeyPage: a
// key's state under each limit that holds any.
type KeyState struct {
	Key    string     `json:"key"`
	Limits []KeyLimit `json:"limits"`
}

// KeyLimit is a key's state under one limit: whose limit it is (a policy,
// "rls/" and an Envoy domain, or empty for an inline limit), the limit, and
// what a request of cost 0 would be told now.
type KeyLimit struct {
	Owner        string `json:"owner,omitempty"`
	Limit        Limit  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	ResetAfterMS int64  `json:"reset_after_ms"`
}

// KeyPage is the body of GET /v1/keys: live keys in order and, when more
// follow, Next, where the next page starts (its after).
type KeyPage struct {
	Keys []KeyState `json:"keys"`
	Next string     `json:"next,omitempty"`
}

// KeyReset is the body of a DELETE /v1/keys/{key} answer: the key, and how
// many limits it held state under.
type KeyReset struct {
	Reset  string `json:"reset"`
	Limits int    `json:"limits"`
}
