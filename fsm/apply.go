package fsm

import (
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
)

// Applying log entries: the dispatch of each command type to its applier,
// and the time every stamped entry moves the state to.

// Apply applies one log entry; see ApplyBatch.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed log entries in order and returns one response
// per entry: a *Response for CommandAllow; a *LeaseResult for the lease
// commands and CommandLeaseTick; a *contract.Error for a command refused as
// it stands (a policy put over a bound, a delete of what does not exist),
// which changes nothing; nil for the other commands and for entries that
// are not commands; and an error wrapping ErrCorruptCommand for an entry
// that cannot be decoded or is damaged (which changes nothing).
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	for i, l := range logs {
		f.lastIndex, f.applyingTerm = l.Index, l.Term
		if l.Type != raft.LogCommand {
			continue
		}
		resp, err := f.applyCommand(l.Data)
		if err != nil {
			f.logger.Error("fsm: refusing log entry", "index", l.Index, "term", l.Term, "err", err)
			if errors.Is(err, errDamaged) && f.damagedAt == 0 {
				f.damagedAt = l.Index
				f.logger.Error("fsm: the log holds a damaged entry; this node's state may differ from the others' from here on", "index", l.Index)
			}
			out[i] = err
			continue
		}
		out[i] = resp
		for _, ev := range f.leases.takeEvents() {
			if f.onLeaseEvent != nil {
				f.onLeaseEvent(ev)
			}
		}
		switch resp.(type) {
		case *Response, *LeaseResult:
			if f.onStamp != nil {
				f.onStamp(l.Index, f.nowNanos)
			}
		}
	}
	return out
}

// ApplyEntry applies one encoded command as the log entry at index, as Raft
// would. Tools that measure the state machine without a cluster use it.
func (f *FSM) ApplyEntry(index uint64, data []byte) any {
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
}

// applyCommands is the dispatch table: one decoder-and-applier per type.
var applyCommands = map[CommandType]func(f *FSM, body []byte) (any, error){
	CommandAllow: func(f *FSM, body []byte) (any, error) {
		var cmd AllowCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if err := f.checkTime(cmd.NowNanos); err != nil {
			return nil, err
		}
		resp := f.applyAllow(&cmd)
		if f.onLocalAnswers != nil && slices.ContainsFunc(resp.Results, func(r Result) bool { return r.GrantsLocalAnswers() }) {
			f.onLocalAnswers(f.applyingTerm)
		}
		if f.onAllow != nil {
			f.onAllow(&cmd, resp)
		}
		return resp, nil
	},
	CommandSetNode: func(f *FSM, body []byte) (any, error) {
		var cmd NodeCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if cmd.ID == "" {
			return nil, fmt.Errorf("node command without an ID")
		}
		f.nodes[cmd.ID] = cmd.HTTPAddr
		return nil, nil
	},
	CommandRemoveNode: func(f *FSM, body []byte) (any, error) {
		var cmd NodeCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		delete(f.nodes, cmd.ID)
		return nil, nil
	},
	CommandAcquireLease: func(f *FSM, body []byte) (any, error) {
		return f.applyLease(body, (*leaseTable).acquire)
	},
	CommandRenewLease: func(f *FSM, body []byte) (any, error) {
		return f.applyLease(body, (*leaseTable).renew)
	},
	CommandReleaseLease: func(f *FSM, body []byte) (any, error) {
		return f.applyLease(body, (*leaseTable).release)
	},
	CommandLeaseTick: func(f *FSM, body []byte) (any, error) {
		var cmd LeaseTickCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if err := f.checkTime(cmd.NowNanos); err != nil {
			return nil, err
		}
		return &LeaseResult{AtNanos: f.advance(cmd.NowNanos)}, nil
	},
	CommandCheckpoint: func(f *FSM, body []byte) (any, error) {
		var cmd CheckpointCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if f.onCheckpoint != nil {
			snap := f.copyState()
			f.onCheckpoint(f.lastIndex, func() [32]byte { return snap.digest() })
		}
		return nil, nil
	},
	CommandPutPolicy: func(f *FSM, body []byte) (any, error) {
		var p contract.Policy
		if err := decodeBody(body, &p); err != nil {
			return nil, err
		}
		return f.putPolicy(p), nil
	},
	CommandDeletePolicy: func(f *FSM, body []byte) (any, error) {
		var cmd NamedDeleteCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		old := f.policies[cmd.Name]
		if old == nil {
			return contract.NotFound("name", "policy %q does not exist", cmd.Name), nil
		}
		f.totalOverrides -= len(old.policy.Overrides)
		delete(f.policies, cmd.Name)
		return nil, nil
	},
	CommandPutRLSConfig: func(f *FSM, body []byte) (any, error) {
		var c rls.Config
		if err := decodeBody(body, &c); err != nil {
			return nil, err
		}
		resp := f.putRLSConfig(c)
		if resp == nil {
			f.rlsVersions[c.Domain] = f.lastIndex
		}
		return resp, nil
	},
	CommandResetKey: func(f *FSM, body []byte) (any, error) {
		var cmd NamedDeleteCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if err := contract.ValidateKey(cmd.Name); err != nil {
			return err, nil
		}
		return f.resetKey(cmd.Name), nil
	},
	CommandReturnShare: func(f *FSM, body []byte) (any, error) {
		var cmd ReturnShareCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if err := f.checkTime(cmd.NowNanos); err != nil {
			return nil, err
		}
		if err := cmd.Validate(); err != nil {
			return err, nil
		}
		return f.returnShare(&cmd), nil
	},
	CommandPutBlock: func(f *FSM, body []byte) (any, error) {
		return f.applyBlock(body, (*FSM).putBlock)
	},
	CommandDeleteBlock: func(f *FSM, body []byte) (any, error) {
		return f.applyBlock(body, (*FSM).deleteBlock)
	},
	CommandAudit: (*FSM).applyAudit,
	CommandSettle: func(f *FSM, body []byte) (any, error) {
		var cmd SettleCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if err := f.checkTime(cmd.NowNanos); err != nil {
			return nil, err
		}
		return f.applySettle(&cmd), nil
	},
	CommandSetClusterID:  (*FSM).applyClusterID,
	CommandRestoreBegin:  (*FSM).applyRestoreBegin,
	CommandRestoreChunk:  (*FSM).applyRestoreChunk,
	CommandRestoreCommit: (*FSM).applyRestoreCommit,
	CommandRestoreAbort:  (*FSM).applyRestoreAbort,
	CommandDeleteRLSConfig: func(f *FSM, body []byte) (any, error) {
		var cmd NamedDeleteCommand
		if err := decodeBody(body, &cmd); err != nil {
			return nil, err
		}
		if f.rlsDomains[cmd.Name] == nil {
			return contract.NotFound("domain", "rate limit service domain %q does not exist", cmd.Name), nil
		}
		delete(f.rlsDomains, cmd.Name)
		delete(f.rlsVersions, cmd.Name)
		return nil, nil
	},
}

// applyLease runs a lease operation at the command's time.
func (f *FSM) applyLease(body []byte, op func(t *leaseTable, now int64, cmd *LeaseCommand) LeaseResult) (any, error) {
	var cmd LeaseCommand
	if err := decodeBody(body, &cmd); err != nil {
		return nil, err
	}
	if err := f.checkTime(cmd.NowNanos); err != nil {
		return nil, err
	}
	now := f.advance(cmd.NowNanos)
	r := op(f.leases, now, &cmd)
	r.AtNanos = now
	return &r, nil
}

// applyBlock runs a block command at the command's time.
func (f *FSM) applyBlock(body []byte, op func(f *FSM, cmd *BlockCommand) any) (any, error) {
	var cmd BlockCommand
	if err := decodeBody(body, &cmd); err != nil {
		return nil, err
	}
	if err := f.checkTime(cmd.NowNanos); err != nil {
		return nil, err
	}
	return op(f, &cmd), nil
}

// checkTime refuses an entry's time outside the safe range or beyond
// StampCeiling for its term.
func (f *FSM) checkTime(stampNanos int64) error {
	if err := checkStamp(stampNanos); err != nil {
		return err
	}
	if ceiling := f.stampCeiling(f.applyingTerm); stampNanos > ceiling {
		return fmt.Errorf("time %d is past %d, the furthest an entry of term %d may move the cluster's %d (MaxTimeStep for a term's first stamped entry, MaxStepInTerm for the others)",
			stampNanos, ceiling, f.applyingTerm, max(f.nowNanos, f.reachedNanos))
	}
	return nil
}

// StampCeiling returns the latest time an entry appended in Raft term term
// may carry now: MaxTimeStep after the latest time applied when no stamped
// entry of term has been applied yet, MaxStepInTerm after it once one has,
// never past MaxNowNanos. A leader clamps its stamps to it (checkTime
// refuses what is past it), so its entries always apply.
func (f *FSM) StampCeiling(term uint64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stampCeiling(term)
}

func (f *FSM) stampCeiling(term uint64) int64 {
	base := max(f.nowNanos, f.reachedNanos)
	if base == 0 {
		return MaxNowNanos
	}
	step := int64(MaxStepInTerm)
	if term != f.stepTerm {
		step = int64(MaxTimeStep)
	}
	return min(base+step, MaxNowNanos)
}

// advance moves cluster time to max(stamp, last applied) and deletes what
// has expired by then.
func (f *FSM) advance(stampNanos int64) int64 {
	now := max(stampNanos, f.nowNanos)
	f.nowNanos = now
	f.reachedNanos = max(f.reachedNanos, now)
	f.stepTerm = f.applyingTerm
	f.expireBuckets(now)
	f.expireDedup(now)
	f.leases.expire(now, maxExpiriesPerApply)
	f.shares.expire(now)
	f.blocks.expire(now, maxExpiriesPerApply)
	f.penalties.expire(now, maxExpiriesPerApply)
	f.settles.expire(now, maxExpiriesPerApply)
	return now
}

// putPolicy stores a policy, returning a *contract.Error (as the apply
// response) if it is invalid or there are too many. Keys already limited by
// the policy keep their state; it is converted to the new limit when next
// used.
func (f *FSM) putPolicy(p contract.Policy) any {
	if err := p.Validate(); err != nil {
		return err
	}
	old := f.policies[p.Name]
	if old == nil && len(f.policies) >= contract.MaxPolicies {
		return contract.Invalid("name", "at most %d policies", contract.MaxPolicies)
	}
	total := f.totalOverrides + len(p.Overrides)
	if old != nil {
		total -= len(old.policy.Overrides)
	}
	if total > contract.MaxTotalOverrides {
		return contract.Invalid("overrides", "the cluster holds at most %d overrides over all policies; this policy would bring it to %d", contract.MaxTotalOverrides, total)
	}
	e := newPolicyEntry(p)
	e.version = f.lastIndex
	if old != nil {
		e.shadowDenied = old.shadowDenied
	}
	f.policies[p.Name] = e
	f.totalOverrides = total
	return nil
}

func (f *FSM) applyCommand(data []byte) (any, error) {
	data, err := unseal(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCommand, err)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty entry", ErrCorruptCommand)
	}
	apply, ok := applyCommands[CommandType(data[0])]
	if !ok {
		return nil, fmt.Errorf("%w: unknown command type %d", ErrCorruptCommand, data[0])
	}
	resp, err := apply(f, data[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: type %d: %w", ErrCorruptCommand, data[0], err)
	}
	f.applied(CommandType(data[0]), resp)
	return resp, nil
}

// applied tells what follows from an applied command of type t that
// answered resp: the policies and domains with local shares are published
// again after a change of either, and a raise is told of.
func (f *FSM) applied(t CommandType, resp any) {
	switch t {
	case CommandPutPolicy, CommandDeletePolicy, CommandPutRLSConfig, CommandDeleteRLSConfig:
		f.publishSharing()
	}
	if e := EffectOf(t, resp); f.onRaise != nil && e.Raised {
		f.onRaise(e.Key)
	}
}
