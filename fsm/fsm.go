package fsm

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/rls"
)

// DedupWindow is how long, in cluster time, the FSM remembers a request ID
// and its first result.
const DedupWindow = 5 * time.Minute

// MaxDedupEntries bounds the request-ID memory of the whole state. When it
// is full, a request with a new ID is refused until IDs reach the end of
// their DedupWindow; no ID is forgotten early (dedup.go).
const MaxDedupEntries = 1 << 20

// MaxNowNanos is the latest time (Unix ns, in the year 2160) an entry may
// carry. Past it, a time plus twice the longest bucket fill time
// (algorithms.MaxFillTime) could overflow int64; an entry claiming it is
// corrupt.
const MaxNowNanos = 6e18

// MaxTimeStep is the furthest the first stamped entry of a Raft term may
// move cluster time ahead: ten years, longer than any outage a cluster
// restarts from. Later entries of the term may move it MaxStepInTerm each.
const MaxTimeStep = 10 * 365 * 24 * time.Hour

// MaxStepInTerm is the furthest a stamped entry may move cluster time ahead
// after the first of its term. A leader stamps the real time elapsed since
// its previous entry (cluster/internal/clusterclock), and an idle leader
// appends a tick every few minutes, so a step of an hour is not taken by a
// sound leader; one that would be is clamped there, and refused here when
// an entry claims it (forged, or a damaged disk). So a forger needs a new
// term for every large step, not just a new entry: the latest time an
// entry may carry (MaxNowNanos), at which cluster time stops for good, is
// some fourteen terms of MaxTimeStep away, not fourteen entries.
const MaxStepInTerm = time.Hour

// MaxRestoreAhead is how far ahead of cluster time a restored backup's time
// may be, counting what earlier restores moved it ahead: backups are taken
// in the past, so a little covers a source cluster whose clock ran ahead,
// and no file, nor any number of them restored in turn, can move time on
// by more (restore.go).
const MaxRestoreAhead = time.Minute

// maxExpiriesPerApply bounds the idle state one log entry deletes, so that a
// million keys going idle at once do not stall one apply. What is left is
// deleted by the following entries; until then it decides exactly as if it
// were gone (a full bucket).
const maxExpiriesPerApply = 4096

// bucketKey identifies one piece of state: a key under one inline limit
// (the same key under a different limit is a different counter), or a key
// under a named policy, whatever the policy's limit is now (limit is then
// zero, and the bucket remembers the limit its state was decided under).
type bucketKey struct {
	key    string
	policy string
	limit  algorithms.Limit
}

// compare orders bucket keys as less does, for slices.SortFunc.
func (a bucketKey) compare(b bucketKey) int {
	switch {
	case a.less(b):
		return -1
	case b.less(a):
		return 1
	}
	return 0
}

func (a bucketKey) less(b bucketKey) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	if a.policy != b.policy {
		return a.policy < b.policy
	}
	la, lb := a.limit, b.limit
	switch {
	case la.Algorithm != lb.Algorithm:
		return la.Algorithm < lb.Algorithm
	case la.Rate != lb.Rate:
		return la.Rate < lb.Rate
	case la.Period != lb.Period:
		return la.Period < lb.Period
	default:
		return la.Burst < lb.Burst
	}
}

// FSM is limitnode's replicated state machine: the state of every limited
// key, the request IDs seen recently, and the members' HTTP addresses.
//
// Apply is deterministic: time comes only from the command, and nothing
// depends on map iteration order, so every replica that applies the same log
// holds the same state (Digest returns the same hash on each).
type FSM struct {
	mu         sync.Mutex
	nowNanos   int64
	buckets    *bucketStore
	dedup      map[string]*dedupEntry
	dedupQueue []*dedupEntry // oldest first; dedupHead is the first live one
	dedupHead  int
	// dedupPerScope counts the remembered IDs of each scope.
	dedupPerScope perCaller
	nodes         map[string]string
	policies      map[string]*policyEntry
	rlsDomains    map[string]*rls.Domain
	// rlsVersions is the index of the entry that put each domain's
	// configuration (contract.DeniedBy.PolicyVersion).
	rlsVersions map[string]uint64
	// totalOverrides counts the overrides of every policy, bounded by
	// contract.MaxTotalOverrides.
	totalOverrides int
	leases         *leaseTable
	shares         *shareLedger // outstanding shares, derived from the buckets
	// sharing is the policies and domains with local shares, published
	// for the hot path to read without the lock (LocalSharesOf,
	// RLSSharesOf).
	sharing atomic.Pointer[sharingView]
	// clusterID is the cluster's ID, once an entry set it (identity.go).
	clusterID string
	// staged is the restore being staged, or nil (restore.go).
	staged *stagedRestore
	// reachedNanos is the latest cluster time ever applied (a restore may
	// rewind nowNanos, not this), stepTerm the Raft term of the latest
	// stamped entry applied, and applyingTerm the term of the entry being
	// applied: they bound how far an entry may move time (apply.go).
	reachedNanos int64
	stepTerm     uint64
	applyingTerm uint64
	// restoreLeadNanos is how far restores have moved cluster time ahead of
	// where the stamps alone would have it, at most MaxRestoreAhead
	// (restore.go).
	restoreLeadNanos int64
	blocks           *blockTable
	audit            *auditTrail
	// penalties counts the denials of keys whose policy has a penalty.
	penalties *penaltyTable
	// settles is the reservations open and the settlements remembered.
	settles *settleTable
	logger  *slog.Logger
	// onStamp, if set, is told the index and cluster time of every applied
	// entry that carries a leader's stamp (allow batches, leases); the
	// node's clock uses it (see cluster/internal/clusterclock).
	onStamp func(index uint64, nowNanos int64)
	// onRaise, if set, is told of every applied command that may give
	// capacity back, and of restores (see OnRaise).
	onRaise func(key string)
	// onCheckpoint, if set, is given the index of every applied
	// CommandCheckpoint and a function that computes the digest of the
	// state at that index (see OnCheckpoint).
	onCheckpoint func(index uint64, digest func() [32]byte)
	// onAllow, if set, is given every applied allow entry and its
	// response (see OnAllowApplied).
	onAllow func(cmd *AllowCommand, resp *Response)
	// onLocalAnswers, if set, is told the term of every applied allow
	// entry that lets a node answer on its own (see OnLocalAnswers).
	onLocalAnswers func(term uint64)
	// onLeaseEvent and onRestore, if set, are told of waiters leaving
	// their queues and of restored snapshots (see OnLeaseEvents).
	onLeaseEvent func(LeaseEvent)
	onRestore    func()
	// onClusterID, if set, is told the cluster's ID once the state holds
	// one (see OnClusterID).
	onClusterID func(id string)
	// lastIndex is the index of the last log entry applied.
	lastIndex uint64
	// damagedAt is the index of the first sealed entry whose checksum
	// failed, or 0.
	damagedAt uint64
	// Scratch space of decide.
	scratchTargets []target
	scratchStates  []algorithms.State
}

// OnRaise registers fn to be called, on the applying goroutine, after each
// applied command that may give capacity back (Effect.Raised) and after a
// restore, with the one key it gave capacity back to, or "" when it may be
// any. fn must not block or call into the FSM. Set it before the FSM is
// given to Raft.
func (f *FSM) OnRaise(fn func(key string)) { f.onRaise = fn }

// OnStampApplied registers fn to be called, on the applying goroutine, with
// the index and cluster time of each applied entry that carries a leader's
// stamp. Set it before the FSM is given to Raft.
func (f *FSM) OnStampApplied(fn func(index uint64, nowNanos int64)) { f.onStamp = fn }

// OnCheckpoint registers fn to be called, on the applying goroutine, with
// the index of each applied checkpoint and a function that computes the
// digest of the state as it was at that index. The state is frozen
// copy-on-write, so fn may call digest later, on any goroutine, while
// applies go on. Set it before the FSM is given to Raft.
func (f *FSM) OnCheckpoint(fn func(index uint64, digest func() [32]byte)) { f.onCheckpoint = fn }

// OnLocalAnswers registers fn to be called, on the applying goroutine,
// with the term of each applied allow entry one of whose results lets a
// node answer on its own later (Result.GrantsLocalAnswers: a deny lease, a
// share): before the entry's callers hear of it, and before any later
// entry is applied, so that a command that gives capacity back, applied
// after it, waits its leases out. Set it before the FSM is given to Raft.
func (f *FSM) OnLocalAnswers(fn func(term uint64)) { f.onLocalAnswers = fn }

// OnAllowApplied registers fn to be called, on the applying goroutine, with
// each applied allow entry and its response, for statistics. fn must not
// block or modify them (the response also goes to the callers). Set it
// before the FSM is given to Raft.
func (f *FSM) OnAllowApplied(fn func(cmd *AllowCommand, resp *Response)) { f.onAllow = fn }

// OnLeaseEvents registers event to be called, on the applying goroutine,
// for each waiter that leaves a lease queue (granted, timed out or
// withdrawn) as entries are applied, and restored after a snapshot replaces
// the state, when events of the entries it covers may have been skipped:
// the caller then looks again with LeaseOf. Neither may block or call into
// the FSM. Set them before the FSM is given to Raft.
func (f *FSM) OnLeaseEvents(event func(LeaseEvent), restored func()) {
	f.onLeaseEvent, f.onRestore = event, restored
}

// Now returns the latest cluster time applied.
func (f *FSM) Now() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nowNanos
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// New returns an empty FSM. Corrupt entries are logged to logger.
func New(logger *slog.Logger) *FSM {
	if logger == nil {
		logger = slog.Default()
	}
	f := &FSM{logger: logger}
	f.reset()
	return f
}

func (f *FSM) reset() {
	f.nowNanos = 0
	f.buckets = newBucketStore()
	f.dedup = make(map[string]*dedupEntry)
	f.dedupQueue = nil
	f.dedupHead = 0
	f.dedupPerScope = perCaller{}
	f.nodes = make(map[string]string)
	f.policies = make(map[string]*policyEntry)
	f.rlsDomains = make(map[string]*rls.Domain)
	f.rlsVersions = make(map[string]uint64)
	f.totalOverrides = 0
	f.leases = newLeaseTable()
	f.shares = newShareLedger()
	f.blocks = newBlockTable()
	f.penalties = newPenaltyTable()
	f.settles = newSettleTable()
	f.audit = &auditTrail{}
	f.clusterID = ""
	f.staged = nil
	f.reachedNanos, f.stepTerm, f.restoreLeadNanos = 0, 0, 0
}
