package cluster

import (
	"context"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

// The audit trail, as a node reads and writes it. An operator's command
// carries who asked (contract.ActorOf its context) into the log inside
// fsm.CommandAudited (commandOnLeader), so the change and its record are
// one entry. A change made outside the FSM is recorded by the leader once
// it is done (recordAudit).

// recordAudit appends, on the leader, the record of a change made outside
// the FSM. The change is made already: a record that cannot be appended
// is logged, not returned.
func (n *Node) recordAudit(ctx context.Context, action, subject, detail string) {
	cmd := &fsm.AuditCommand{Actor: contract.ActorOf(ctx), Action: action, Subject: subject, Detail: detail}
	err := func() error {
		stamp, err := n.leaderStamp()
		if err != nil {
			return err
		}
		cmd.NowNanos = stamp
		return n.applyCommand(fsm.CommandAudit, cmd)
	}()
	if err != nil {
		n.logger.Warn("the audit trail could not record a change", "action", action, "subject", subject, "actor", cmd.Actor, "err", err)
	}
}

// Audit returns up to limit entries of the audit trail recorded after log
// index since, oldest first, as this node has applied them after catching
// up with the leader (as Policies does).
func (n *Node) Audit(ctx context.Context, since uint64, limit int) (contract.AuditPage, error) {
	if err := n.catchUp(ctx); err != nil {
		return contract.AuditPage{}, err
	}
	return n.fsm.AuditPage(since, limit), nil
}

// RecentAudit returns the last n entries of the audit trail this node has
// applied, newest first, without asking the leader: for the status page.
func (n *Node) RecentAudit(count int) []contract.AuditEntry { return n.fsm.RecentAudit(count) }
