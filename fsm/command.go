package fsm

import (
	"bytes"
	"errors"
	"fmt"

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
)

// ErrCorruptCommand is returned (as the Apply response) for a log entry that
// cannot be decoded. No state changes for such an entry, on any replica.
var ErrCorruptCommand = errors.New("fsm: corrupt command")

// Check is one limit check of an allow request: cost against the limit of key.
type Check struct {
	Key       string
	Algorithm algorithms.Algorithm
	Rate      int64
	Period    int64 // nanoseconds
	Burst     int64
	Cost      int64
}

// Limit returns the check's limit.
func (c Check) Limit() algorithms.Limit {
	return algorithms.Limit{Algorithm: c.Algorithm, Rate: c.Rate, PeriodNanos: c.Period, Burst: c.Burst}
}

// NewCheck returns a check of cost against limit l on key.
func NewCheck(key string, l algorithms.Limit, cost int64) Check {
	return Check{Key: key, Algorithm: l.Algorithm, Rate: l.Rate, Period: l.PeriodNanos, Burst: l.Burst, Cost: cost}
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
}

// Result is the outcome of one Request.
type Result struct {
	// Allowed is true when every check allowed and all consumed.
	Allowed bool
	// Decisions has one decision per check, in order.
	Decisions []algorithms.Decision
	// Duplicate is true when the request's ID had been seen: the result is
	// the first one, and nothing was consumed this time.
	Duplicate bool
	// Error, when not empty, says why the request was refused as invalid;
	// it consumed nothing.
	Error string
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

// EncodeValue encodes v as msgpack with the FSM's handle; used for the
// forwarding protocol so that both ends share one encoding.
func EncodeValue(v any) ([]byte, error) {
	var buf []byte
	err := codec.NewEncoderBytes(&buf, msgpackHandle).Encode(v)
	return buf, err
}

// DecodeValue decodes msgpack produced by EncodeValue into v, rejecting
// trailing bytes.
func DecodeValue(data []byte, v any) error { return decodeBody(data, v) }

// validate checks a decoded allow request as strictly as the HTTP API does,
// so that a corrupt or hand-built entry can never reach the algorithms with
// values they would overflow on.
func (r *Request) validate() error {
	if len(r.RequestID) > MaxRequestIDBytes {
		return fmt.Errorf("request_id longer than %d bytes", MaxRequestIDBytes)
	}
	if len(r.Checks) == 0 || len(r.Checks) > MaxChecks {
		return fmt.Errorf("a request needs 1 to %d checks", MaxChecks)
	}
	for i, c := range r.Checks {
		if c.Key == "" || len(c.Key) > MaxKeyBytes {
			return fmt.Errorf("check %d: key must be 1 to %d bytes", i, MaxKeyBytes)
		}
		l := c.Limit()
		if err := l.Validate(); err != nil {
			return fmt.Errorf("check %d: %w", i, err)
		}
		if err := l.ValidateCost(c.Cost); err != nil {
			return fmt.Errorf("check %d: %w", i, err)
		}
		for j := range i {
			if r.Checks[j].Key == c.Key && r.Checks[j].Limit() == l {
				return fmt.Errorf("checks %d and %d name the same key and limit", j, i)
			}
		}
	}
	return nil
}
