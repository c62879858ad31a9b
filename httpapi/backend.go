package httpapi

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

// The HTTP API serves one backend: a value that decides (Decider) and
// does any of the other jobs below, one interface each, so that each
// handler depends on the few methods it calls and a test fakes only
// those. *cluster.Node does every job. A route of a job the backend does
// not do answers 501 (code not_implemented), naming the interface.

// roles are the jobs of one backend, found by type assertion; nil where it
// does not do one.
type roles struct {
	Decider    Decider
	Policies   PolicyStore
	RLS        RLSStore
	Leases     LeaseKeeper
	Membership Membership
	Backups    Backups
	Observer   Observer
	Keys       KeyStore
	Blocks     BlockList
	Audit      AuditLog
	Settler    Settler
}

// rolesOf finds the jobs backend does.
func rolesOf(backend Decider) roles {
	r := roles{Decider: backend}
	r.Policies, _ = backend.(PolicyStore)
	r.RLS, _ = backend.(RLSStore)
	r.Leases, _ = backend.(LeaseKeeper)
	r.Membership, _ = backend.(Membership)
	r.Backups, _ = backend.(Backups)
	r.Observer, _ = backend.(Observer)
	r.Keys, _ = backend.(KeyStore)
	r.Blocks, _ = backend.(BlockList)
	r.Audit, _ = backend.(AuditLog)
	r.Settler, _ = backend.(Settler)
	return r
}

// needs is handler when every job in jobs is done (each a role, nil when
// the backend does not do it, and the interface's name), and otherwise a
// handler that answers 501 naming the first job missing.
func needs(handler http.HandlerFunc, jobs ...job) http.HandlerFunc {
	for _, j := range jobs {
		if j.missing {
			name := j.name
			return func(w http.ResponseWriter, r *http.Request) {
				writeError(w, &apiError{status: http.StatusNotImplemented, code: codeNotImplemented,
					message: r.Method + " " + r.URL.Path + " is not served here: this server's backend does not implement httpapi." + name})
			}
		}
	}
	return handler
}

// job is one of the backend's jobs as needs reads it.
type job struct {
	name    string
	missing bool
}

// jobOf is the job named name, missing when role is nil.
func jobOf[T any](role T, name string) job {
	return job{name: name, missing: any(role) == nil}
}

// Decider decides requests; see cluster.Node.Allow for its errors.
type Decider interface {
	// Allow decides a request.
	Allow(ctx context.Context, req contract.Request) (contract.Decision, error)
	// AllowBatch decides independent requests together.
	AllowBatch(ctx context.Context, reqs []contract.Request) ([]contract.BatchResult, error)
	// ReturnShare gives back unspent units of a share a caller took
	// (contract.Request.Share), and returns the units given back.
	ReturnShare(ctx context.Context, ret contract.ShareReturn) (int64, error)
}

// PolicyStore keeps the named policies.
type PolicyStore interface {
	// PutPolicy creates or replaces a named policy.
	PutPolicy(ctx context.Context, p contract.Policy) error
	// DeletePolicy deletes a named policy.
	DeletePolicy(ctx context.Context, name string) error
	// Policies lists a page of the policies as this node has applied them,
	// once it holds every write acknowledged before the call: up to limit
	// named after after, holding at most maxOverrides overrides (at least
	// one policy), and the name to continue after. Every read of this
	// package's stores fails (contract.ErrNoLeader) rather than answer
	// from a state that may miss an acknowledged write.
	Policies(ctx context.Context, after string, limit, maxOverrides int) (page []contract.PolicyStatus, next string, err error)
	// Policy returns one policy, read as Policies reads.
	Policy(ctx context.Context, name string) (contract.PolicyStatus, bool, error)
}

// RLSStore keeps the rate limit service's domain configurations.
type RLSStore interface {
	// PutRLSConfig creates or replaces a domain's configuration.
	PutRLSConfig(ctx context.Context, c rls.Config) error
	// DeleteRLSConfig deletes a domain's configuration.
	DeleteRLSConfig(ctx context.Context, domain string) error
	// RLSConfig returns a domain's configuration, read as
	// PolicyStore.Policies reads.
	RLSConfig(ctx context.Context, domain string) (rls.Config, bool, error)
	// RLSDomains returns the configured domains, sorted, read as
	// PolicyStore.Policies reads.
	RLSDomains(ctx context.Context) ([]string, error)
}

// LeaseKeeper hands out concurrency leases.
type LeaseKeeper interface {
	// AcquireLease takes one of req.Max concurrent slots of req.Key.
	AcquireLease(ctx context.Context, req contract.LeaseRequest) (contract.Lease, error)
	// RenewLease moves a held lease's expiry to ttl from now.
	RenewLease(ctx context.Context, id string, ttl time.Duration) (contract.Lease, error)
	// ReleaseLease gives a lease back, or takes a waiting request out of
	// its queue.
	ReleaseLease(ctx context.Context, id string) (atNanos int64, err error)
	// Leases returns the leases held on key and the requests waiting for
	// one as this node has applied them, with the cluster time of that
	// state.
	Leases(key string) (nowNanos int64, leases []contract.HeldLease, queued []contract.QueuedLease)
}

// Membership changes who the cluster's members are and who leads.
type Membership interface {
	// Join adds a member to the cluster, with the checks change lifts.
	Join(ctx context.Context, m contract.Member, change contract.MemberChange) error
	// RemoveMember removes a member from the cluster, with the checks
	// change lifts.
	RemoveMember(ctx context.Context, id string, change contract.MemberChange) error
	// TransferLeadership hands leadership over to the member to (any
	// other voter when "").
	TransferLeadership(ctx context.Context, to string) error
	// CheckConsistency compares every member's state with the leader's at
	// a new checkpoint.
	CheckConsistency(ctx context.Context) (contract.ConsistencyReport, error)
}

// KeyStore shows and resets keys, for operators.
type KeyStore interface {
	// ResetKey deletes a key's state under every limit through the log,
	// returning how many limits it held state under.
	ResetKey(ctx context.Context, key string) (int, error)
	// Key returns a key's state, read as PolicyStore.Policies reads.
	Key(ctx context.Context, key string) (contract.KeyState, bool, error)
	// Keys returns a page of live keys with a prefix, after after, and the
	// key to continue after, read as PolicyStore.Policies reads.
	Keys(ctx context.Context, prefix, after string, limit int) (page []contract.KeyState, next string, err error)
}

// BlockList keeps the keys that are denied outright.
type BlockList interface {
	// PutBlock blocks a key for a while, replacing a block it has.
	PutBlock(ctx context.Context, req contract.BlockRequest) (contract.Block, error)
	// DeleteBlock lifts a key's block, returning it.
	DeleteBlock(ctx context.Context, key string) (contract.Block, error)
	// Blocks returns a page of the blocked keys after after, read as
	// PolicyStore.Policies reads, the cluster time of that reading, and
	// the key to continue after.
	Blocks(ctx context.Context, after string, limit int) (nowNanos int64, page []contract.Block, next string, err error)
	// BlockSummary counts the blocked keys as this node has applied them,
	// with up to latest of the blocks that began last.
	BlockSummary(latest int) contract.BlockSummary
}

// Settler settles reservations: what an admission with settle reserved,
// given back or charged as the request used.
type Settler interface {
	// Settle settles one reservation.
	Settle(ctx context.Context, req contract.SettleRequest) (contract.Settlement, error)
}

// AuditLog reads the audit trail of the changes operators made.
type AuditLog interface {
	// Audit returns a page of the changes recorded after log index since,
	// oldest first, read as PolicyStore.Policies reads.
	Audit(ctx context.Context, since uint64, limit int) (contract.AuditPage, error)
	// RecentAudit returns the last n changes this node has applied,
	// newest first.
	RecentAudit(n int) []contract.AuditEntry
}

// Backups writes and restores backup files.
type Backups interface {
	// Backup freezes this node's state for a backup file, once it has
	// caught up with the leader.
	Backup(ctx context.Context) (contract.Backup, error)
	// Restore replaces the cluster's state with a backup file's (on the
	// leader; elsewhere a *contract.NotLeaderError).
	Restore(ctx context.Context, r io.Reader) (backup contract.BackupInfo, restoredIndex uint64, err error)
}

// Observer tells how the node and the cluster are.
type Observer interface {
	// Status returns the node's view of the cluster.
	Status() contract.Status
	// Stats returns the decisions the node has applied lately, with up to
	// top heavy hitters each.
	Stats(ctx context.Context, top int) contract.Stats
	// Ready returns "" when the node serves as a member, else why not.
	Ready() string
}
