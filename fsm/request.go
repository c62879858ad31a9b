package fsm

import (
	"fmt"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

// A member that is not the leader asks the leader to append a command for
// it (package cluster's forwarding protocol carries the command as it is
// encoded here). DecodeRequest is how the leader reads one: only the
// commands a member may ask for, each checked with the rule the FSM applies
// it with, so that a command refused as it stands never becomes a log
// entry; and the leader stamps its time on those that carry one.

// requestRule is how the leader reads one type of requested command.
type requestRule struct {
	// body returns a new body to decode into.
	body func() any
	// check refuses a body as it stands.
	check func(body any) *contract.Error
	// stamp, when set, writes the leader's time into the body.
	stamp func(body any, nowNanos int64)
}

func stampLease(body any, nowNanos int64) { body.(*LeaseCommand).NowNanos = nowNanos }

func stampBlock(body any, nowNanos int64) { body.(*BlockCommand).NowNanos = nowNanos }

// requestRules are the commands a member may ask the leader to append. The
// others (allow batches, which have their own path with group commit,
// checkpoints, lease ticks and members' addresses) only the leader writes.
var requestRules = map[CommandType]requestRule{
	CommandPutPolicy: {
		body:  func() any { return new(contract.Policy) },
		check: func(b any) *contract.Error { return b.(*contract.Policy).Validate() },
	},
	CommandDeletePolicy: {
		body:  func() any { return new(NamedDeleteCommand) },
		check: func(b any) *contract.Error { return contract.ValidatePolicyName(b.(*NamedDeleteCommand).Name) },
	},
	CommandPutRLSConfig: {
		body:  func() any { return new(rls.Config) },
		check: func(b any) *contract.Error { return b.(*rls.Config).Validate() },
	},
	CommandDeleteRLSConfig: {
		body:  func() any { return new(NamedDeleteCommand) },
		check: func(b any) *contract.Error { return rls.ValidateDomain(b.(*NamedDeleteCommand).Name) },
	},
	CommandResetKey: {
		body:  func() any { return new(NamedDeleteCommand) },
		check: func(b any) *contract.Error { return contract.ValidateKey(b.(*NamedDeleteCommand).Name) },
	},
	CommandReturnShare: {
		body:  func() any { return new(ReturnShareCommand) },
		check: func(b any) *contract.Error { return b.(*ReturnShareCommand).Validate() },
		stamp: func(b any, nowNanos int64) { b.(*ReturnShareCommand).NowNanos = nowNanos },
	},
	CommandPutBlock: {
		body:  func() any { return new(BlockCommand) },
		check: func(b any) *contract.Error { return validateBlockCommand(b.(*BlockCommand)) },
		stamp: stampBlock,
	},
	CommandDeleteBlock: {
		body:  func() any { return new(BlockCommand) },
		check: func(b any) *contract.Error { return contract.ValidateKey(b.(*BlockCommand).Key) },
		stamp: stampBlock,
	},
	CommandSettle: {
		body: func() any { return new(SettleCommand) },
		check: func(b any) *contract.Error {
			c := b.(*SettleCommand)
			return (&contract.SettleRequest{ID: c.ID, Cost: c.Cost, Scope: c.Scope}).Validate()
		},
		stamp: func(b any, nowNanos int64) { b.(*SettleCommand).NowNanos = nowNanos },
	},
	CommandAcquireLease: {
		body: func() any { return new(LeaseCommand) },
		check: func(b any) *contract.Error {
			c := b.(*LeaseCommand)
			if err := validOwner(c.Owner); err != nil {
				return err
			}
			return validateLease(c.ID, contract.LeaseRequest{Key: c.Key, Max: c.Max, TTL: time.Duration(c.TTLNanos), MaxWait: time.Duration(c.MaxWaitNanos), MaxQueue: c.MaxQueue})
		},
		stamp: stampLease,
	},
	CommandRenewLease: {
		body: func() any { return new(LeaseCommand) },
		check: func(b any) *contract.Error {
			c := b.(*LeaseCommand)
			if err := contract.ValidateLeaseID(c.ID); err != nil {
				return err
			}
			return contract.ValidateLeaseTTL(time.Duration(c.TTLNanos))
		},
		stamp: stampLease,
	},
	CommandReleaseLease: {
		body:  func() any { return new(LeaseCommand) },
		check: func(b any) *contract.Error { return contract.ValidateLeaseID(b.(*LeaseCommand).ID) },
		stamp: stampLease,
	},
}

// Requested is a command a member asked the leader to append, decoded and
// checked. Type is the command's own type, also when it travels inside
// CommandAudited (then audited is set, with who asked).
type Requested struct {
	Type    CommandType
	body    any
	rule    requestRule
	audited *AuditedCommand
}

// DecodeRequest reads a command a member asks the leader to append, as
// Encode wrote it. A damaged entry, a type that only the leader writes, or a
// body that does not decode is an error; a body refused as it stands is the
// *contract.Error of the field at fault.
func DecodeRequest(data []byte) (Requested, error) {
	data, err := unseal(data)
	if err != nil {
		return Requested{}, fmt.Errorf("%w: %w", ErrCorruptCommand, err)
	}
	if len(data) == 0 {
		return Requested{}, fmt.Errorf("%w: empty command", ErrCorruptCommand)
	}
	t := CommandType(data[0])
	if t == CommandAudited {
		return decodeAudited(data[1:])
	}
	rule, ok := requestRules[t]
	if !ok {
		return Requested{}, fmt.Errorf("%w: command type %d is not one a member may ask the leader for", ErrCorruptCommand, t)
	}
	body := rule.body()
	if err := decodeBody(data[1:], body); err != nil {
		return Requested{}, fmt.Errorf("%w: type %d: %w", ErrCorruptCommand, t, err)
	}
	if err := rule.check(body); err != nil {
		return Requested{}, err
	}
	return Requested{Type: t, body: body, rule: rule}, nil
}

// decodeAudited reads an operator's command inside CommandAudited: the
// command as DecodeRequest reads it on its own, and who asked.
func decodeAudited(body []byte) (Requested, error) {
	var env AuditedCommand
	if err := decodeBody(body, &env); err != nil {
		return Requested{}, fmt.Errorf("%w: type %d: %w", ErrCorruptCommand, CommandAudited, err)
	}
	if err := contract.ValidateActor(env.Actor); err != nil {
		return Requested{}, err
	}
	if len(env.Command) == 0 || !Audited(CommandType(env.Command[0])) {
		return Requested{}, fmt.Errorf("%w: an audited command must carry an operator's command", ErrCorruptCommand)
	}
	t := CommandType(env.Command[0])
	rule := requestRules[t]
	inner := rule.body()
	if err := decodeBody(env.Command[1:], inner); err != nil {
		return Requested{}, fmt.Errorf("%w: type %d: %w", ErrCorruptCommand, t, err)
	}
	if err := rule.check(inner); err != nil {
		return Requested{}, err
	}
	return Requested{Type: t, body: inner, rule: rule, audited: &env}, nil
}

// Stamped reports whether the command carries the leader's time.
func (r *Requested) Stamped() bool { return r.rule.stamp != nil || r.audited != nil }

// Stamp writes the leader's time into a command that carries one.
func (r *Requested) Stamp(nowNanos int64) {
	if r.rule.stamp != nil {
		r.rule.stamp(r.body, nowNanos)
	}
	if r.audited != nil {
		r.audited.NowNanos = nowNanos
	}
}

// Encode returns the log entry of the command (inside CommandAudited when
// it came in one).
func (r *Requested) Encode() ([]byte, error) {
	if r.audited == nil {
		return Encode(r.Type, r.body)
	}
	inner, err := encodeBare(r.Type, r.body)
	if err != nil {
		return nil, err
	}
	env := *r.audited
	env.Command = inner
	return Encode(CommandAudited, &env)
}
