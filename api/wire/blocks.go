package wire

// BlockRequest is the body of PUT /v1/blocks/{key}: how long the key is
// blocked (a Go duration) and why (shown to the callers it denies).
type BlockRequest struct {
	TTL    *string `json:"ttl"`
	Reason string  `json:"reason,omitempty"`
}

// Block is one blocked key: the answer of a put or a delete, and one entry
// of a BlockPage. Times are the cluster's (Unix ms); EndsInMS counts from
// the node's reading of cluster time when it answered. Penalty names the
// policy whose penalty imposed the block, when one did.
type Block struct {
	Key         string `json:"key"`
	Reason      string `json:"reason,omitempty"`
	Penalty     string `json:"penalty,omitempty"`
	SinceUnixMS int64  `json:"since_unix_ms"`
	UntilUnixMS int64  `json:"until_unix_ms"`
	EndsInMS    int64  `json:"ends_in_ms"`
}

// BlockPage is the body of GET /v1/blocks: blocked keys in order and, when
// more follow, Next, where the next page starts (its after).
type BlockPage struct {
	Blocks []Block `json:"blocks"`
	Next   string  `json:"next,omitempty"`
}

// Blocked, in an allow answer, says that a block denied the request: on
// which key (not in answers a proxy may copy to its client), why, the
// policy whose penalty imposed it if one did, and how long it has left.
type Blocked struct {
	Key      string `json:"key,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Penalty  string `json:"penalty,omitempty"`
	EndsInMS int64  `json:"ends_in_ms"`
}
