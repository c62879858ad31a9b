package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/msgpack"
	"github.com/limitnode/limitnode/rls"
)

// The audit trail: every change an operator makes, recorded in the
// replicated state with the entry's index, its cluster time and who asked.
// A change that is a command (a policy, a domain, a block, a key reset)
// travels inside CommandAudited, which applies it and records it in one
// entry, so the record cannot be had without the change nor the change
// without the record; a change made outside the FSM (membership, a
// hand-over, a restore) is recorded by the leader with CommandAudit once it
// is done. The trail keeps the last contract.MaxAuditEntries, counting the
// ones it drops. It is in snapshots, not in backups: a restore keeps the
// cluster's own trail (applyRestoreCommit).

// AuditedCommand is the body of CommandAudited: an operator's command (its
// type byte and msgpack body, as Encode writes them before the seal) and
// who asked for it, at the leader's time.
type AuditedCommand struct {
	NowNanos int64
	Actor    string
	Command  []byte
}

// AuditCommand is the body of CommandAudit: a change made outside the FSM,
// recorded at the leader's time.
type AuditCommand struct {
	NowNanos                       int64
	Actor, Action, Subject, Detail string
}

// auditable are the commands an operator sends, which CommandAudited may
// carry, and what the trail calls them.
var auditable = map[CommandType]string{
	CommandPutPolicy:       contract.AuditPolicyPut,
	CommandDeletePolicy:    contract.AuditPolicyDelete,
	CommandPutRLSConfig:    contract.AuditRLSPut,
	CommandDeleteRLSConfig: contract.AuditRLSDelete,
	CommandPutBlock:        contract.AuditBlockPut,
	CommandDeleteBlock:     contract.AuditBlockDelete,
	CommandResetKey:        contract.AuditKeyReset,
}

// Audited reports whether commands of type t are recorded in the audit
// trail, and so travel inside CommandAudited (EncodeAudited).
func Audited(t CommandType) bool { _, ok := auditable[t]; return ok }

// EncodeAudited returns the log entry of command t with body, asked for by
// actor, inside CommandAudited; the leader stamps its time (DecodeRequest).
func EncodeAudited(actor string, t CommandType, body any) ([]byte, error) {
	inner, err := encodeBare(t, body)
	if err != nil {
		return nil, err
	}
	return Encode(CommandAudited, &AuditedCommand{Actor: actor, Command: inner})
}

// encodeBare is a command's type byte and msgpack body, unsealed.
func encodeBare(t CommandType, body any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(t))
	if err := codec.NewEncoder(&buf, msgpack.Handle).Encode(body); err != nil {
		return nil, fmt.Errorf("fsm: encode command %d: %w", t, err)
	}
	return buf.Bytes(), nil
}

// CommandAudited dispatches to the table it is in, so it joins the table
// once the table is built.
func init() { applyCommands[CommandAudited] = (*FSM).applyAudited }

// auditTrail is the recorded changes, oldest first from head.
type auditTrail struct {
	entries []contract.AuditEntry
	head    int
	dropped int64
}

// add records e, dropping the oldest when the trail is full.
func (a *auditTrail) add(e contract.AuditEntry) {
	if len(a.entries)-a.head >= contract.MaxAuditEntries {
		a.entries[a.head] = contract.AuditEntry{}
		a.head++
		a.dropped++
	}
	if a.head > 0 && a.head >= len(a.entries)/2 {
		a.entries = append(a.entries[:0], a.entries[a.head:]...)
		a.head = 0
	}
	a.entries = append(a.entries, e)
}

// live returns the entries kept, oldest first.
func (a *auditTrail) live() []contract.AuditEntry { return a.entries[a.head:] }

// applyAudited applies an operator's command and records it.
func (f *FSM) applyAudited(body []byte) (any, error) {
	var cmd AuditedCommand
	if err := decodeBody(body, &cmd); err != nil {
		return nil, err
	}
	if err := f.checkTime(cmd.NowNanos); err != nil {
		return nil, err
	}
	if err := contract.ValidateActor(cmd.Actor); err != nil {
		return nil, errors.New(err.Message)
	}
	if len(cmd.Command) == 0 {
		return nil, errors.New("an audited command without a command")
	}
	t := CommandType(cmd.Command[0])
	action, ok := auditable[t]
	if !ok {
		return nil, fmt.Errorf("command type %d is not one an operator sends", t)
	}
	resp, err := applyCommands[t](f, cmd.Command[1:])
	if err != nil {
		return nil, err
	}
	f.applied(t, resp)
	if _, refused := resp.(*contract.Error); !refused {
		subject, detail := describe(t, cmd.Command[1:], resp)
		f.audit.add(contract.AuditEntry{Index: f.lastIndex, AtNanos: recordTime(cmd.NowNanos, f.nowNanos), Actor: cmd.Actor, Action: action, Subject: subject, Detail: detail})
	}
	return resp, nil
}

// applyAudit records a change made outside the FSM.
func (f *FSM) applyAudit(body []byte) (any, error) {
	var cmd AuditCommand
	if err := decodeBody(body, &cmd); err != nil {
		return nil, err
	}
	if err := f.checkTime(cmd.NowNanos); err != nil {
		return nil, err
	}
	if err := validateAuditRecord(&contract.AuditEntry{Actor: cmd.Actor, Action: cmd.Action, Subject: cmd.Subject, Detail: cmd.Detail}); err != nil {
		return nil, err
	}
	f.audit.add(contract.AuditEntry{Index: f.lastIndex, AtNanos: recordTime(cmd.NowNanos, f.nowNanos), Actor: cmd.Actor, Action: cmd.Action, Subject: cmd.Subject, Detail: cmd.Detail})
	return nil, nil
}

// recordTime is the cluster time a record is given: the leader's stamp,
// never before the latest applied. A record does not move cluster time
// (it changes no limit), so recording a change leaves the limits state as
// the change left it.
func recordTime(stampNanos, nowNanos int64) int64 { return max(stampNanos, nowNanos) }

// maxAuditTextBytes bounds an entry's subject and detail.
const maxAuditTextBytes = 1024

// validateAuditRecord checks what an entry says: an actor, an action, and
// short texts.
func validateAuditRecord(e *contract.AuditEntry) error {
	if err := contract.ValidateActor(e.Actor); err != nil {
		return errors.New(err.Message)
	}
	if e.Action == "" || len(e.Action) > 64 || len(e.Subject) > maxAuditTextBytes || len(e.Detail) > maxAuditTextBytes {
		return errors.New("an audit record's action is 1 to 64 bytes, its subject and detail at most 1024")
	}
	return nil
}

// describe says on what an applied operator's command acted and how, for
// its record.
func describe(t CommandType, body []byte, resp any) (subject, detail string) {
	switch t {
	case CommandPutPolicy:
		var p contract.Policy
		if decodeBody(body, &p) == nil {
			detail = limitText(p.Limit)
			if len(p.Overrides) > 0 {
				detail += fmt.Sprintf(", %d overrides", len(p.Overrides))
			}
			if p.KeyTemplate != "" {
				detail += ", key_template " + p.KeyTemplate
			}
			if p.Shadow {
				detail += ", shadow"
			}
			return p.Name, detail
		}
	case CommandPutRLSConfig:
		var c rls.Config
		if decodeBody(body, &c) == nil {
			return c.Domain, fmt.Sprintf("%d descriptors", len(c.Descriptors))
		}
	case CommandDeletePolicy, CommandDeleteRLSConfig, CommandResetKey:
		var cmd NamedDeleteCommand
		if decodeBody(body, &cmd) == nil {
			subject = cmd.Name
		}
		if r, ok := resp.(*ResetResult); ok {
			detail = fmt.Sprintf("%d limits", r.Buckets)
		}
		return subject, detail
	case CommandPutBlock, CommandDeleteBlock:
		if r, ok := resp.(*BlockResult); ok {
			if t == CommandPutBlock {
				detail = fmt.Sprintf("for %s", time.Duration(r.Block.UntilNanos-r.Block.SinceNanos))
				if r.Block.Reason != "" {
					detail += ": " + r.Block.Reason
				}
			}
			return r.Block.Key, detail
		}
	}
	return "", ""
}

// limitText is a limit as an entry's detail reads it: "token_bucket 100
// per 1m0s, burst 200".
func limitText(l algorithms.Limit) string {
	text := fmt.Sprintf("%s %d per %s", l.Algorithm, l.Rate, l.Period)
	if l.Algorithm.IsBucket() && l.Burst != l.Rate {
		text += fmt.Sprintf(", burst %d", l.Burst)
	}
	return text
}

// AuditPage returns up to limit entries of the trail recorded after log
// index since, oldest first, the index to continue after (0 at the end),
// and how many entries the trail has dropped.
func (f *FSM) AuditPage(since uint64, limit int) contract.AuditPage {
	f.mu.Lock()
	defer f.mu.Unlock()
	live := f.audit.live()
	// The first entry after since, found without since+1, which wraps to 0
	// at the largest index.
	i, _ := slices.BinarySearchFunc(live, since, func(e contract.AuditEntry, since uint64) int {
		if e.Index <= since {
			return -1
		}
		return 1
	})
	page := contract.AuditPage{Entries: slices.Clone(live[i:min(i+limit, len(live))]), Dropped: f.audit.dropped}
	if i+limit < len(live) {
		page.Next = page.Entries[len(page.Entries)-1].Index
	}
	return page
}

// RecentAudit returns the last n entries of the trail, newest first.
func (f *FSM) RecentAudit(n int) []contract.AuditEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	live := f.audit.live()
	out := slices.Clone(live[max(len(live)-n, 0):])
	slices.Reverse(out)
	return out
}
