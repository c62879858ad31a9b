package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/msgpack"
	"github.com/limitnode/limitnode/rls"
)

// CommandType is the first byte of every command in the Raft log.
type CommandType byte

// The command types. Values are part of the on-disk log format: never reuse
// or renumber one.
const (
	// CommandAllow decides a batch of allow requests at the leader's time.
	CommandAllow CommandType = 1
	// CommandSetNode records a member's HTTP address.
	CommandSetNode CommandType = 2
	// CommandRemoveNode forgets a member's HTTP address.
	CommandRemoveNode CommandType = 3
	// CommandPutPolicy creates or replaces a named policy.
	CommandPutPolicy CommandType = 4
	// CommandDeletePolicy deletes a named policy.
	CommandDeletePolicy CommandType = 5
	// CommandAcquireLease takes a concurrency lease.
	CommandAcquireLease CommandType = 6
	// CommandReleaseLease gives a concurrency lease back.
	CommandReleaseLease CommandType = 7
	// CommandCheckpoint changes nothing: every replica that applies it
	// takes the digest of its state at that index, so that replicas can be
	// compared (see FSM.OnCheckpoint).
	CommandCheckpoint CommandType = 8
	// CommandPutRLSConfig creates or replaces an Envoy rate limit service
	// domain's configuration.
	CommandPutRLSConfig CommandType = 9
	// CommandDeleteRLSConfig deletes a domain's configuration.
	CommandDeleteRLSConfig CommandType = 10
	// CommandLeaseTick changes nothing but cluster time: the leader
	// appends one when a lease queue is due to change by time alone (a
	// waiter's deadline, or an expiry that frees a slot for a waiter), so
	// that it changes then even when nothing else is appended.
	CommandLeaseTick CommandType = 11
	// CommandRenewLease moves a held lease's expiry to its TTL from the
	// command's time.
	CommandRenewLease CommandType = 12
	// CommandResetKey deletes every bucket of one key (a
	// NamedDeleteCommand naming it), under every limit and policy: the key
	// starts afresh, as if it had never been used.
	CommandResetKey CommandType = 13
	// CommandSetClusterID records the cluster's ID (a ClusterIDCommand),
	// once: the first one applied wins and later ones change nothing.
	CommandSetClusterID CommandType = 14
	// CommandRestoreBegin, CommandRestoreChunk, CommandRestoreCommit and
	// CommandRestoreAbort restore a backup through the log (restore.go).
	CommandRestoreBegin  CommandType = 15
	CommandRestoreChunk  CommandType = 16
	CommandRestoreCommit CommandType = 17
	CommandRestoreAbort  CommandType = 18
	// CommandReturnShare gives back what a holder did not spend of a
	// share (a ReturnShareCommand).
	CommandReturnShare CommandType = 30
	// CommandPutBlock blocks a key until a cluster time (a BlockCommand):
	// every request on it is denied without touching its counters.
	CommandPutBlock CommandType = 20
	// CommandDeleteBlock lifts a key's block.
	CommandDeleteBlock CommandType = 21
	// CommandAudited carries an operator's command and who asked for it
	// (an AuditedCommand): the command is applied, and recorded in the
	// audit trail, in one entry.
	CommandAudited CommandType = 22
	// CommandAudit records in the audit trail a change made outside the
	// FSM (an AuditCommand): a membership change, a hand-over, a restore.
	CommandAudit CommandType = 23
	// CommandSettle settles a reservation (a SettleCommand): gives back
	// what it did not use, or charges what it used beyond.
	CommandSettle CommandType = 24
)

// Effect is what an applied command means for the answers nodes give
// without the log: deny leases (a denial repeated until it may no longer
// hold) and shares (admissions from units taken ahead).
type Effect struct {
	// Raised: the command may have given capacity back, so a denial
	// decided before it may be wrong after it. Every node drops its deny
	// leases when it applies it (only those on Key, when Key is set), and
	// the leader acknowledges it only once every lease that could
	// contradict it has ended.
	Raised bool
	Key    string
	// OutlastsShares: the command takes capacity away in a way a share
	// granted before it could still spend (a block), so the leader
	// acknowledges it only once those shares have ended.
	OutlastsShares bool
	// Background: no caller waits for the command's answer (a holder
	// giving back a share it retired), so the leader answers it at once.
	Background bool
}

// Waits reports whether the leader must wait out the leases and shares
// granted before the command before acknowledging it.
func (e Effect) Waits() bool { return (e.Raised || e.OutlastsShares) && !e.Background }

// EffectOf is the Effect of an applied command of type t that answered
// result. This is the one place that says which commands give capacity
// back: a policy or RLS domain put or deleted, a key reset, a block lifted
// or shortened, a settlement that gave units back, a share given back, a
// restore. Every other command only takes capacity away, or changes none.
func EffectOf(t CommandType, result any) Effect {
	switch t {
	case CommandPutPolicy, CommandDeletePolicy, CommandPutRLSConfig, CommandDeleteRLSConfig, CommandResetKey, CommandDeleteBlock:
		return Effect{Raised: true}
	}
	switch r := result.(type) {
	case *BlockResult:
		return Effect{Raised: r.Shortened, OutlastsShares: true}
	case *SettleResult:
		return Effect{Raised: r.Settlement.Refunded > 0}
	case *ShareReturn:
		return Effect{Raised: r.Units > 0, Key: r.Key, Background: r.Background}
	case *RestoreResult:
		return Effect{Raised: true}
	}
	return Effect{}
}

// LeaseTickCommand is the body of CommandLeaseTick.
type LeaseTickCommand struct {
	NowNanos int64
}

// CheckpointCommand is the body of CommandCheckpoint.
type CheckpointCommand struct{}

// ErrCorruptCommand is returned (as the Apply response) for a log entry that
// cannot be decoded. No state changes for such an entry, on any replica.
var ErrCorruptCommand = errors.New("fsm: corrupt command")

// Check is a contract.Check as the log carries it: the limit's fields
// inline, so that an entry stays small. Dimensions keep the order the
// caller gave.
type Check struct {
	Key        string
	Algorithm  algorithms.Algorithm
	Rate       int64
	Period     int64 // nanoseconds
	Burst      int64
	Cost       int64
	Policy     string
	Dimensions []contract.Dimension
}

// Limit returns the check's inline limit.
func (c *Check) Limit() algorithms.Limit {
	return algorithms.Limit{Algorithm: c.Algorithm, Rate: c.Rate, Period: time.Duration(c.Period), Burst: c.Burst}
}

// CheckOf returns the log's form of a check.
func CheckOf(c contract.Check) Check {
	return Check{Key: c.Key, Algorithm: c.Limit.Algorithm, Rate: c.Limit.Rate, Period: int64(c.Limit.Period), Burst: c.Limit.Burst,
		Cost: c.Consumes(), Policy: c.Policy, Dimensions: c.Dimensions}
}

// contract returns the check in the contract's form.
func (c *Check) contract() contract.Check {
	return contract.Check{Key: c.Key, Limit: c.Limit(), Policy: c.Policy, Dimensions: c.Dimensions, Cost: c.Cost, Peek: c.Cost == 0}
}

// Request is one caller's allow request: every check is admitted, or none.
type Request struct {
	// RequestID, when not empty, makes the request idempotent for
	// DedupWindow of cluster time: the same request with an ID already
	// seen in its scope is answered with the first result and consumes
	// nothing; a different one is refused as a conflict.
	RequestID string
	Checks    []Check
	// Scope is whose the request ID is (contract.Request.Scope). After the
	// fields above, so that entries written before it decode with an
	// empty scope.
	Scope string
	// RLS, when set, is an Envoy rate limit service query, decided instead
	// of Checks (which are then empty). After the fields above, as Scope.
	RLS *rls.Query
	// MaxWait is contract.Request.MaxWaitNanos: admit by reservation
	// within it. After the fields above, as Scope.
	MaxWait int64
	// Share, when set, asks for a share of the one check's budget besides
	// its cost (see ShareAsk). After the fields above, as Scope.
	Share *ShareAsk
	// Settle, when set, makes the admission a reservation to settle (see
	// settle.go). Last, as Scope.
	Settle *SettleAsk
}

// AllowCommand is a batch of independent requests decided at one instant.
type AllowCommand struct {
	// NowNanos is the leader's clock when it built the batch. The FSM uses
	// max(NowNanos, the latest time it has applied), so time never runs
	// backwards across a change of leader.
	NowNanos int64
	Requests []Request
	// MaxKeys, when positive, is the most (key, limit) pairs the state may
	// hold: the leader's configuration, carried in each entry so that every
	// replica applies the same cap.
	MaxKeys int64
	// KeyLimitFailOpen says what happens to a request that would create
	// state past MaxKeys: admitted without being recorded (true), or
	// refused with CodeKeyLimit (false).
	KeyLimitFailOpen bool
	// MaxIDsPerCaller, when positive, is the most request IDs one scope
	// (Request.Scope) may have remembered at once (see dedup.go): the
	// leader's configuration, as MaxKeys. Last, so that entries written
	// before it decode with no bound but the state's.
	MaxIDsPerCaller int64
}

// Result is the outcome of one Request.
type Result struct {
	// Allowed is true when every check that is not in shadow mode allowed,
	// and then all consumed.
	Allowed bool
	// Checks has one result per check, in order.
	Checks []CheckResult
	// Duplicate is true when the request's ID had been seen: the result is
	// the first one, and nothing was consumed this time.
	Duplicate bool
	// Rejection, when not nil, says why the request was refused without a
	// decision; it consumed nothing.
	Rejection *contract.Error
	// AtNanos is the cluster time the request was decided at (for a
	// duplicate, the time of the first decision).
	AtNanos int64
	// RLS has one status per descriptor of an RLS query; Checks then holds
	// the decisions of the limits that applied (Status.Check). After the
	// fields above, so that results written before it decode without.
	RLS []rls.Status
	// DenyForNanos, for a denial, is how long from cluster time
	// DenyAtNanos the same request stays denied if nothing but time passes
	// (the longest wait of the checks that deny): what a node may answer
	// it with, without asking, until then (a deny lease, see package
	// cluster). 0 when the denial is not to be repeated so: a shadow
	// check (its denials are counted), max_wait (a reservation may admit
	// it sooner), or a denial only because another request on the key is
	// on its way to the log. Last, as RLS.
	DenyAtNanos  int64
	DenyForNanos int64
	// Leased is set by package cluster on an answer a node gave from a
	// deny lease; the log never holds it.
	Leased bool
	// Share is the share granted to the request's ask, if any. Last, as
	// RLS.
	Share *GrantedShare
	// Shared is set by package cluster on an answer a node gave from a
	// share it holds; the log never holds it.
	Shared bool
	// Blocked, for a denial because a key is blocked, names the check
	// and the block. Last, as RLS.
	Blocked *contract.BlockedCheck
	// DeniedBy, for a denial, says which check denied it, under which
	// policy, limit and version, and why (see deniedBy). Last, as RLS.
	DeniedBy *contract.DeniedBy
	// Penalized names the policy (or rls/ and the domain) whose penalty
	// this denial completed, blocking the key. Last, as RLS.
	Penalized string
	// SettlementID names the reservation an admitted request with Settle
	// holds, to settle with CommandSettle. Last, as RLS.
	SettlementID string
}

// denyFor is how long a denied request stays denied if only time passes:
// the longest retry of its checks that deny (time only adds capacity, for
// every algorithm), or 0 when it is not to be repeated (see
// Result.DenyForNanos).
func denyFor(req *Request, checks []CheckResult) int64 {
	if req.MaxWait > 0 {
		return 0
	}
	var longest int64
	for i := range checks {
		c := &checks[i]
		if c.Shadow {
			return 0
		}
		if !c.Decision.Allowed {
			longest = max(longest, int64(c.Decision.RetryAfter))
		}
	}
	return longest
}

// CheckResult is the outcome of one check.
type CheckResult struct {
	Decision algorithms.Decision
	// PeriodNanos is the period of the limit the check was decided under
	// (a policy's limit is only known when the entry is applied).
	PeriodNanos int64
	// Key is the key the check was decided on, when a policy's template
	// made it from dimensions; empty otherwise.
	Key string
	// Shadow is true when the check's policy is in shadow mode: its
	// decision is reported and counted but never denies the request.
	Shadow bool
	// Rate is the limit's rate per period: the quota a client may spend
	// each period (for a bucket, what it refills; Decision.Limit is its
	// capacity). Last, so that results written before it decode.
	Rate int64
}

// NodeCommand records (CommandSetNode) or forgets (CommandRemoveNode) the
// HTTP address of a cluster member, so that every node can find the HTTP
// address of any other, for example the leader's.
type NodeCommand struct {
	ID       string
	HTTPAddr string
}

// Response is what Apply returns for a CommandAllow entry.
type Response struct {
	Results []Result
}

// checkStamp refuses a time an entry or a snapshot cannot carry.
func checkStamp(nowNanos int64) error {
	if nowNanos < 0 || nowNanos > MaxNowNanos {
		return fmt.Errorf("time %d outside [0, %d]", nowNanos, int64(MaxNowNanos))
	}
	return nil
}

// ClampStamp bounds the time a leader stamps on an entry, given the latest
// time the state machine applied: at most MaxNowNanos and at most
// MaxTimeStep later than last. It is the outer bound; FSM.StampCeiling is
// the state machine's own, for the leader's term. Whatever its clock says,
// a leader that clamps to both has its entries apply, and no entry can
// leave the cluster unable to decide.
func ClampStamp(stampNanos, lastNanos int64) int64 {
	stamp := min(stampNanos, int64(MaxNowNanos))
	if lastNanos > 0 {
		stamp = min(stamp, lastNanos+int64(MaxTimeStep))
	}
	return max(stamp, 0)
}

// Encode returns the log entry for a command: its type byte then its msgpack
// body, sealed with a checksum (see seal.go).
func Encode(t CommandType, body any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(t))
	if err := codec.NewEncoder(&buf, msgpack.Handle).Encode(body); err != nil {
		return nil, fmt.Errorf("fsm: encode command %d: %w", t, err)
	}
	return seal(buf.Bytes()), nil
}

// decodeBody decodes data into v and requires that nothing follows.
func decodeBody(data []byte, v any) error {
	dec := codec.NewDecoderBytes(data, msgpack.Handle)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if n := dec.NumBytesRead(); n != len(data) {
		return fmt.Errorf("%d trailing bytes", len(data)-n)
	}
	return nil
}

// Validate checks the request as the contract does (see
// contract.Request.Validate), so that a corrupt or hand-built entry can never
// reach the algorithms with values they would overflow on.
func (r *Request) Validate() *contract.Error {
	if r.RLS != nil {
		if len(r.Checks) > 0 || r.RequestID != "" || r.MaxWait != 0 || r.Settle != nil {
			return contract.Invalid("checks", "a rate limit service query carries no checks, no request ID, no max_wait and no settle")
		}
		if err := r.RLS.Validate(); err != nil {
			return err
		}
		if r.Share != nil {
			return r.Share.validate(r)
		}
		return nil
	}
	// Most requests have one or two checks: keep those off the heap.
	var small [2]contract.Check
	checks := small[:0]
	for i := range r.Checks {
		checks = append(checks, r.Checks[i].contract())
	}
	cr := contract.Request{RequestID: r.RequestID, Checks: checks, Scope: r.Scope, MaxWait: time.Duration(r.MaxWait)}
	if r.Settle != nil {
		if r.Settle.TTLNanos == 0 {
			return contract.Invalid("settle.ttl", "settle.ttl is required")
		}
		cr.SettleTTL = time.Duration(r.Settle.TTLNanos)
	}
	if err := cr.Validate(); err != nil {
		return err
	}
	if r.Share != nil {
		if r.Settle != nil {
			return contract.Invalid("settle", "a request to settle takes no share")
		}
		return r.Share.validate(r)
	}
	return nil
}
