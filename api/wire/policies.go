package wire

// Policy is a named limit stored in the cluster: the body of
// PUT /v1/policies/{name} (without ShadowDenied, which the cluster counts,
// and Version, the log index of its last change) and of the answers that
// show one.
type Policy struct {
	Name         string            `json:"name,omitempty"`
	Limit        *Limit            `json:"limit"`
	Overrides    map[string]*Limit `json:"overrides,omitempty"`
	Shadow       bool              `json:"shadow"`
	KeyTemplate  string            `json:"key_template,omitempty"`
	ShadowDenied *int64            `json:"shadow_denied,omitempty"`
	LocalShares  *LocalShares      `json:"local_shares,omitempty"`
	Version      uint64            `json:"version,omitempty"`
	Penalty      *Penalty          `json:"penalty,omitempty"`
	MaxDebt      int64             `json:"max_debt,omitempty"`
}

// Penalty blocks a key a policy denies often: after Denials denials within
// Within of the first (a Go duration), for BlockFor.
type Penalty struct {
	Denials  int64  `json:"denials"`
	Within   string `json:"within"`
	BlockFor string `json:"block_for"`
}

// PolicyPage is the body of GET /v1/policies: a page sorted by name and,
// when more follow, Next, where the next page starts (its after).
type PolicyPage struct {
	Policies []Policy `json:"policies"`
	Next     string   `json:"next,omitempty"`
}

// PolicyFile is the file of the node's -policies flag: policies by name.
type PolicyFile struct {
	Policies map[string]*Policy `json:"policies"`
}
