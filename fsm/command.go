package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/limitnode/limitnode/algorithms"
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
)

// ErrCorruptCommand is returned (as the Apply response) for a log entry that
// cannot be decoded. No state changes for such an entry, on any replica.
var ErrCorruptCommand = errors.New("fsm: corrupt command")

// Check is one limit check of an allow request: Cost against a limit on a
// key. The limit is given inline (Algorithm ... Burst), or by Policy, a named
// policy resolved when the entry is applied, so that every replica uses the
// policy as it stands at that log index. With a policy that has a key
// template, Dimensions fill the template and Key is empty.
type Check struct {
	Key        string
	Algorithm  algorithms.Algorithm
	Rate       int64
	Period     int64 // nanoseconds
	Burst      int64
	Cost       int64
	Policy     string
	Dimensions []Dimension // sorted by name
}

// Dimension is one named part of a key, for a policy's key template.
type Dimension struct {
	Name  string
	Value string
}

// Limit returns the check's inline limit.
func (c Check) Limit() algorithms.Limit {
	return algorithms.Limit{Algorithm: c.Algorithm, Rate: c.Rate, PeriodNanos: c.Period, Burst: c.Burst}
}

// NewCheck returns a check of cost against limit l on key.
func NewCheck(key string, l algorithms.Limit, cost int64) Check {
	return Check{Key: key, Algorithm: l.Algorithm, Rate: l.Rate, Period: l.PeriodNanos, Burst: l.Burst, Cost: cost}
}

// NewPolicyCheck returns a check of cost against the named policy, on key or
// on the key the policy's template makes of dimensions.
func NewPolicyCheck(key, policy string, dimensions []Dimension, cost int64) Check {
	return Check{Key: key, Policy: policy, Dimensions: dimensions, Cost: cost}
}

// Request is one caller's allow request: every check is admitted, or none.
type Request struct {
	// RequestID, when not empty, makes the request idempotent for
	// DedupWindow of cluster time: a request with an ID already seen is
	// answered with the first result and consumes nothing.
	RequestID string
	Checks    []Check
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
	Rejection *Rejection
	// AtNanos is the cluster time the request was decided at (for a
	// duplicate, the time of the first decision).
	AtNanos int64
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
}

// Rejection is a request refused as it stands: Code says how
// ("invalid_argument" or "not_found"), Field names the offending field in
// the HTTP API's terms when one is at fault.
type Rejection struct {
	Code    string
	Field   string
	Message string
}

// Rejection codes.
const (
	CodeInvalid  = "invalid_argument"
	CodeNotFound = "not_found"
	// CodeKeyLimit: the request would create state past the key cap.
	CodeKeyLimit = "key_limit"
)

// Error returns the rejection's message.
func (r *Rejection) Error() string { return r.Message }

func reject(code, field, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
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

// Limits on what a decoded command may contain. A leader never builds larger
// ones; a larger one in the log is corrupt.
const (
	MaxKeyBytes       = 512
	MaxRequestIDBytes = 64
	// MaxChecks is the most checks one request may combine atomically.
	MaxChecks = 32
)

// Codec returns the msgpack handle of the log's commands. Package cluster
// uses it for the forwarding protocol, whose messages carry these types, so
// both speak one encoding.
func Codec() *codec.MsgpackHandle { return msgpackHandle }

// checkStamp refuses a time an entry or a snapshot cannot carry.
func checkStamp(nowNanos int64) error {
	if nowNanos < 0 || nowNanos > MaxNowNanos {
		return fmt.Errorf("time %d outside [0, %d]", nowNanos, int64(MaxNowNanos))
	}
	return nil
}

var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.MaxInitLen = 4096 // a corrupt length prefix must not allocate gigabytes up front
	h.ErrorIfNoField = true
	h.WriteExt = true
	h.StructToArray = true // fields by position, not by name: smaller and faster
	return h
}()

// Encode returns the log entry for a command: its type byte then its msgpack
// body.
func Encode(t CommandType, body any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(t))
	if err := codec.NewEncoder(&buf, msgpackHandle).Encode(body); err != nil {
		return nil, fmt.Errorf("fsm: encode command %d: %w", t, err)
	}
	return buf.Bytes(), nil
}

// decodeBody decodes data into v and requires that nothing follows.
func decodeBody(data []byte, v any) error {
	dec := codec.NewDecoderBytes(data, msgpackHandle)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if n := dec.NumBytesRead(); n != len(data) {
		return fmt.Errorf("%d trailing bytes", len(data)-n)
	}
	return nil
}

// Validate checks what can be checked of an allow request before
// policies are resolved, as strictly as the HTTP API does, so that a corrupt
// or hand-built entry can never reach the algorithms with values they would
// overflow on.
func (r *Request) Validate() *Rejection {
	if len(r.RequestID) > MaxRequestIDBytes {
		return reject(CodeInvalid, "request_id", "request_id longer than %d bytes", MaxRequestIDBytes)
	}
	if len(r.Checks) == 0 || len(r.Checks) > MaxChecks {
		return reject(CodeInvalid, "checks", "a request needs 1 to %d checks", MaxChecks)
	}
	for i := range r.Checks {
		if err := r.Checks[i].validate(); err != nil {
			if len(r.Checks) > 1 {
				err.Field = fmt.Sprintf("checks[%d].%s", i, err.Field)
			}
			return err
		}
	}
	return nil
}

func (c *Check) validate() *Rejection {
	if c.Cost < 0 {
		return reject(CodeInvalid, "cost", "cost must not be negative")
	}
	if len(c.Key) > MaxKeyBytes {
		return reject(CodeInvalid, "key", "key must be 1 to %d bytes", MaxKeyBytes)
	}
	if c.Policy != "" {
		if c.Limit() != (algorithms.Limit{}) {
			return reject(CodeInvalid, "policy", "a check names a policy or gives a limit, not both")
		}
		if (c.Key == "") == (len(c.Dimensions) == 0) {
			return reject(CodeInvalid, "key", "a policy check needs a key, or dimensions for a policy with a key template")
		}
		return validateDimensions(c.Dimensions)
	}
	if c.Key == "" {
		return reject(CodeInvalid, "key", "key must be 1 to %d bytes", MaxKeyBytes)
	}
	if len(c.Dimensions) > 0 {
		return reject(CodeInvalid, "dimensions", "dimensions need a policy with a key template")
	}
	l := c.Limit()
	if err := l.Validate(); err != nil {
		return limitRejection("limit.", err)
	}
	if err := l.ValidateCost(c.Cost); err != nil {
		return limitRejection("", err)
	}
	return nil
}

// limitRejection turns a validation error of package algorithms into a
// rejection naming the field under prefix.
func limitRejection(prefix string, err error) *Rejection {
	var fe *algorithms.FieldError
	if errors.As(err, &fe) {
		return reject(CodeInvalid, prefix+fe.Field, "%v", err)
	}
	return reject(CodeInvalid, strings.TrimSuffix(prefix, "."), "%v", err)
}
