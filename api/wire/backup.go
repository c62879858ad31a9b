package wire

// Restored is the body of a POST /v1/snapshot answer: the index whose state
// the backup held, the index at which the cluster installed it, and the
// SHA-256 of its limits state in hex.
type Restored struct {
	BackupIndex   uint64 `json:"backup_index"`
	RestoredIndex uint64 `json:"restored_index"`
	LimitsDigest  string `json:"limits_digest"`
}
