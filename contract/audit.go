package contract

import (
	"context"
	"strings"
)

// Bounds on the audit trail.
const (
	// MaxAuditEntries is how many changes the trail keeps: past it, the
	// oldest is dropped (and counted) for each new one.
	MaxAuditEntries = 10_000
	// MaxActorBytes bounds who made a change (an API token's name).
	MaxActorBytes = MaxScopeBytes
	// DefaultAuditPage and MaxAuditPage size the pages of the listing.
	DefaultAuditPage = 100
	MaxAuditPage     = 1000
)

// The actions of the audit trail (AuditEntry.Action).
const (
	AuditPolicyPut          = "policy.put"
	AuditPolicyDelete       = "policy.delete"
	AuditRLSPut             = "rls.put"
	AuditRLSDelete          = "rls.delete"
	AuditBlockPut           = "block.put"
	AuditBlockDelete        = "block.delete"
	AuditKeyReset           = "key.reset"
	AuditMemberJoin         = "member.join"
	AuditMemberRemove       = "member.remove"
	AuditLeadershipTransfer = "leadership.transfer"
	AuditRestore            = "restore"
)

// AuditEntry is one change an operator made, as the replicated state
// recorded it.
type AuditEntry struct {
	// Index is the log index of the entry that made (or recorded) it.
	Index uint64
	// AtNanos is the cluster time of that entry (Unix ns).
	AtNanos int64
	// Actor is who asked: the name of the API token (never the token),
	// or "" when tokens are off or a program embedding a node asked
	// without naming itself (WithActor).
	Actor string
	// Action is what was done (AuditPolicyPut, ...), Subject on what (a
	// policy's name, a domain, a key, a member's ID, a backup's index),
	// and Detail how, in a few words.
	Action, Subject, Detail string
}

// AuditPage is a page of the audit trail: entries oldest first, Next the
// index to continue after (0 at the end), Dropped how many of the oldest
// the trail has let go of.
type AuditPage struct {
	Entries []AuditEntry
	Next    uint64
	Dropped int64
}

// actorKey is the context key of WithActor.
type actorKey struct{}

// WithActor returns ctx naming actor as who asks for the changes made with
// it, so that the audit trail records them under that name (the HTTP API
// names the token a call came with).
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf returns the actor ctx names, or "".
func ActorOf(ctx context.Context) string {
	actor, _ := ctx.Value(actorKey{}).(string)
	return actor
}

// ValidateActor checks an actor: at most MaxActorBytes, without NUL.
func ValidateActor(actor string) *Error {
	if len(actor) > MaxActorBytes || strings.IndexByte(actor, 0) >= 0 {
		return Invalid("actor", "an actor's name is at most %d bytes, without NUL", MaxActorBytes)
	}
	return nil
}

// ValidateAuditPage checks an audit listing's page size.
func ValidateAuditPage(limit int) *Error {
	if limit < 1 || limit > MaxAuditPage {
		return Invalid("limit", "limit must be an integer from 1 to %d", MaxAuditPage)
	}
	return nil
}
