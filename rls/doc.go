// Package rls reads the configuration format of envoyproxy/ratelimit, the
// reference rate limit service of Envoy: it parses one domain's YAML,
// validates it, and matches request descriptors against it exactly as the
// reference does.
//
// Parse turns YAML (or JSON, which is YAML too) into a Config and validates
// it whole; every error names the field at fault as a path
// ("descriptors[0].descriptors[1].rate_limit.unit") and starts with the line
// of the offending node. Config.Validate applies the same rules to a Config
// that did not come from text, such as one read back from the Raft log.
// Compile builds a Domain, whose Match finds the rate limit that applies to
// a request descriptor: per level, an exact key and value first, then the
// level's wildcard values in config order, then the key alone; a limit
// applies only at the descriptor's last entry. CounterKey names the counter
// a match counts on, and Limit turns a rate_limit into the algorithms.Limit
// limitnode decides with.
//
// Differences from the reference, each deliberate:
//
//   - A key is compared exactly and a wildcard pattern only against the
//     value. The reference matches "key_value" strings, so that key "a" with
//     value "b_c" and key "a_b" with value "c" are one descriptor to it; they
//     are two here, and '*' in a key is refused rather than matched.
//   - quota_mode and value_to_metric are refused unless false, metadata
//     unless empty (see Parse), as
//     are keys in the wrong place and numbers with a fraction, which the
//     reference ignores or truncates, a unit of any spelling beside
//     unlimited (the reference refuses only a valid one), more than one
//     YAML document (the reference reads the first), and control
//     characters in a domain, key, value or name.
//   - A rate_limit may name an algorithm and a burst (limitnode's
//     extensions); without them it is a fixed window, as in the reference.
//     It may also take a penalty and local_shares (Match.Shares), which
//     the reference does not know.
//   - Metric paths are built from the configuration only (Match.Path), so a
//     request cannot create metrics; detailed_metric marks a limit as
//     metered rather than putting request values into metric names.
//   - Bounds (MaxConfigBytes and the other Max constants) cap what one
//     domain and one request descriptor may hold.
//
// The package does no I/O, reads no clock and keeps no global state; Match
// iterates no map, so every replica of the state machine matches alike.
package rls
