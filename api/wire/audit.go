package wire

// AuditEntry is one change an operator made: the log index of its entry,
// its cluster time (Unix ms), the name of the token that asked (empty when
// tokens are off), what was done, on what, and how.
type AuditEntry struct {
	Index    uint64 `json:"index"`
	AtUnixMS int64  `json:"at_unix_ms"`
	Actor    string `json:"actor,omitempty"`
	Action   string `json:"action"`
	Subject  string `json:"subject,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// AuditPage is the body of GET /v1/audit: changes oldest first; Next, when
// more follow, is the index to pass as since; Dropped is how many of the
// oldest the cluster no longer keeps.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    uint64       `json:"next,omitempty"`
	Dropped int64        `json:"dropped"`
}
