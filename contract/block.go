package contract

import (
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds on the block list.
const (
	// MaxBlocks bounds the blocked keys of the cluster, put by operators
	// and imposed by penalties together.
	MaxBlocks = 100_000
	// MaxBlockReasonBytes bounds a block's reason.
	MaxBlockReasonBytes = 256
	// MinBlockTTL and MaxBlockTTL bound how long a block lasts.
	MinBlockTTL = time.Second
	MaxBlockTTL = 366 * 24 * time.Hour
	// DefaultBlockPage and MaxBlockPage size the pages of the listing.
	DefaultBlockPage = 100
	MaxBlockPage     = 1000
)

// BlockRequest blocks a key for TTL of cluster time: every request that
// counts on it is denied, on every path, without touching its counters.
// The key is the key a check is decided on (the one given, or the one a
// policy's template makes), whatever its limit or policy, or the counter
// key of an Envoy rate limit service descriptor (as the key listing shows
// it).
type BlockRequest struct {
	Key    string
	Reason string
	TTL    time.Duration
}

// Validate checks a block request as a caller makes it: ValidateEntry, and
// a reason of visible text (ValidateText).
func (b *BlockRequest) Validate() *Error {
	if err := b.ValidateEntry(); err != nil {
		return err
	}
	return ValidateText("reason", b.Reason, MaxBlockReasonBytes)
}

// ValidateEntry checks a block request as the log may hold it: the key, the
// TTL, and a reason by ValidateBlockReason. The state machine re-checks
// entries with it, and not with the text rule, which entries appended
// before the rule may break: a node that replays one decides as the nodes
// that applied it did.
func (b *BlockRequest) ValidateEntry() *Error {
	if err := ValidateKey(b.Key); err != nil {
		return err
	}
	if err := ValidateBlockReason(b.Reason); err != nil {
		return err
	}
	if b.TTL < MinBlockTTL || b.TTL > MaxBlockTTL {
		return Invalid("ttl", "ttl must be a Go duration from %s to %s", MinBlockTTL, MaxBlockTTL)
	}
	return nil
}

// ValidateBlockReason checks a block's reason as the log and snapshots may
// hold it: at most MaxBlockReasonBytes of UTF-8 on one line. A new reason
// must also be visible text (BlockRequest.Validate).
func ValidateBlockReason(reason string) *Error {
	if len(reason) > MaxBlockReasonBytes || !utf8.ValidString(reason) {
		return Invalid("reason", "reason must be at most %d bytes of UTF-8", MaxBlockReasonBytes)
	}
	for _, r := range reason {
		if unicode.IsControl(r) {
			return Invalid("reason", "reason must be one line of text, without control characters")
		}
	}
	return nil
}

// Block is one entry of the block list, as of one cluster time.
type Block struct {
	Key    string
	Reason string
	// SinceNanos and UntilNanos are the cluster times (Unix ns) the block
	// began and ends.
	SinceNanos, UntilNanos int64
	// Penalty is the policy whose penalty imposed the block, or "" for a
	// block an operator put.
	Penalty string
}

// BlockSummary is the block list at a glance: how many keys are blocked,
// how many of them by a penalty, and the latest blocks.
type BlockSummary struct {
	// AtNanos is the cluster time of the reading.
	AtNanos            int64
	Blocked, ByPenalty int
	// Latest are the blocks that began last, latest first.
	Latest []Block
}

// ValidateBlockPage checks a block listing's page size.
func ValidateBlockPage(limit int) *Error {
	if limit < 1 || limit > MaxBlockPage {
		return Invalid("limit", "limit must be an integer from 1 to %d", MaxBlockPage)
	}
	return nil
}

// BlockedCheck says which check of a request a block denied (for an Envoy
// rate limit service query, which of its limits) and the block.
type BlockedCheck struct {
	Check int
	Block
}
