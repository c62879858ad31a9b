// Package auth decides who may call which part of limitnode's API: bearer
// tokens from a token file, each with roles.
//
// The file holds only SHA-256 hashes of the tokens, never a token itself:
//
//	{"tokens": [{"name": "checkout", "sha256": "<64 hex digits>", "roles": ["decide"]}]}
//
// Roles: RoleDecide (ask for decisions and leases), RoleRead (read state,
// metrics and the status page), RoleAdmin (everything, including writes of
// policies, membership and snapshots). RoleAdmin implies the other two.
//
// The file is re-read when it changes; a version that does not parse, or
// that names an unknown role or a hash that is not 64 hex digits, is refused
// whole and the last good one stays in force. Presented tokens are hashed
// and compared with every entry in constant time. Neither a token nor the
// file's content ever reaches a log: errors name the file and the entry.
package auth
