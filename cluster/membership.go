package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/cluster/internal/health"
	"github.com/limitnode/limitnode/cluster/internal/identity"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/transport"
)

// Join adds m to the cluster as a voter, or records its HTTP address if a
// member with the same ID and Raft address is already there (so a retried
// join is harmless). Any member may be asked; a follower passes the request
// to the leader.
//
// Everything is checked before anything changes, so a refused join changes
// nothing:
//   - the node at m.RaftAddr must answer as m.ID (a mistyped address names
//     another node or none);
//   - a member recorded with m.ID at another address must no longer answer
//     there as m.ID, unless change.Replace: a second node started with a
//     running member's ID would evict it;
//   - each step (removing the old entries, adding m) must leave a quorum of
//     the new configuration's voters answering, unless change.Force.
//
// A member recorded at m.RaftAddr under another ID is removed first: the
// node there now answers as m.ID, so that member was rebuilt under a new ID.
func (n *Node) Join(ctx context.Context, m contract.Member, change contract.MemberChange) error {
	if err := m.Validate(); err != nil {
		return err
	}
	return n.route.op(ctx, &forwardRequest{Op: opJoin, Member: m, Change: change, Actor: contract.ActorOf(ctx)}, func() error { return n.members.join(ctx, m, change) })
}

// RemoveMember removes the member with the given ID from the cluster.
// Removing the leader itself is allowed: it steps down once the change is
// committed. A member that is not there is a contract.ErrNotFound; a removal
// that would leave fewer answering voters than a quorum of the rest is a
// contract.ErrConflict naming them, unless change.Force.
func (n *Node) RemoveMember(ctx context.Context, id string, change contract.MemberChange) error {
	if err := contract.ValidateNodeID(id); err != nil {
		return err
	}
	return n.route.op(ctx, &forwardRequest{Op: opRemove, Member: contract.Member{ID: id}, Change: change, Actor: contract.ActorOf(ctx)}, func() error { return n.members.remove(ctx, id, change) })
}

// members changes the cluster's membership, on the leader, and knows
// whether this node is still in it.
type members struct {
	raft    *raft.Raft
	selfID  string
	logger  *slog.Logger
	dialer  transport.Dialer // to ping members over the forwarding protocol
	records *identity.Records
	// httpAddrOf is the HTTP address the replicated state records for a
	// member (fsm.FSM.NodeHTTPAddr).
	httpAddrOf func(id string) string
	// apply appends a command on the leader.
	apply func(t fsm.CommandType, body any) error
	// audit records an operator's change in the audit trail.
	audit func(ctx context.Context, action, subject, detail string)
	// foreignDialer says which other cluster's nodes dialed this node
	// within a time (transport.Mux.ForeignDialer).
	foreignDialer func(within time.Duration) (cluster string, ok bool)
	// removed is set while this node, once a member, is not in the
	// configuration it knows; track keeps it.
	removed atomic.Bool
	// startedAlone holds the first decisions of a node that is its
	// cluster's only voter (awaitDialers).
	startedAlone startupHold
}

// startupHold is how long after it starts a node that is its cluster's
// only voter waits before it decides anything.
type startupHold struct {
	length time.Duration             // holdAloneFor the node's Raft timeouts
	until  atomic.Pointer[time.Time] // the end of the wait: length after the start
	over   atomic.Bool               // set once the wait ended, or was not needed
}

// track notes whether this node is in the latest configuration it knows,
// and returns it: a node whose data directory records it was a member
// (identity.Records.IsRecordedMember) and is not is marked removed, which
// it logs once; a member is recorded as one.
func (ms *members) track() bool {
	member := ms.isMember()
	if !member && ms.records.IsRecordedMember() && !ms.removed.Swap(true) {
		ms.logger.Warn("this node was removed from the cluster: it decides nothing and /readyz answers 503 until an operator joins it again; " + removedAdvice)
	}
	if member {
		ms.removed.Store(false)
		ms.records.RecordMember()
	}
	return member
}

// isRemoved reports whether this node was removed from its cluster.
func (ms *members) isRemoved() bool { return ms.removed.Load() }

// refuseOutside returns contract.ErrNotMember, with the reason, while this
// node was removed from its cluster (errRemoved) or runs as a cluster of
// its own that other nodes count as theirs (foreignReason): every path
// that decides or appends asks it first, so that such a node answers
// nothing its real cluster would have to agree to. It costs two atomic
// loads when nothing dials the node.
func (ms *members) refuseOutside() error {
	if ms.removed.Load() {
		return errRemoved
	}
	if reason := ms.foreignReason(); reason != "" {
		return fmt.Errorf("%w: %s", contract.ErrNotMember, reason)
	}
	return nil
}

// holdAloneFor is how long a node that starts as its cluster's only voter
// waits before it decides anything. A node whose data directory was lost
// and that was started again without -join forms a cluster of its own at
// its old address; its old cluster's nodes dial it, and are refused by the
// cluster ID (foreignReason), within that time. Had it decided before, it
// would have admitted calls its old cluster had counted already. The
// longest hashicorp/raft leaves between two such dials is a leaderless
// remnant's: a follower stands for election within twice the heartbeat
// timeout, and a candidate asks every voter again within twice the
// election timeout (a leader retries a member it cannot reach far sooner:
// within half the heartbeat timeout). The hold is twice that longest gap.
func holdAloneFor(heartbeatTimeout, electionTimeout time.Duration) time.Duration {
	return 4 * max(heartbeatTimeout, electionTimeout)
}

// awaitDialers holds a decision or a command, on a node that is its
// cluster's only voter, until holdAloneFor has passed since the node
// started (startedAlone), so that nodes of a cluster that counts its
// address as theirs have dialed it first (refuseOutside then refuses it).
// A node with other voters never waits: without a quorum of them it
// decides nothing anyway. Membership changes and reads do not wait: they
// decide no call, and a cluster of one grows by joins. When ctx ends first
// it returns a contract.ErrNoLeader.
func (ms *members) awaitDialers(ctx context.Context) error {
	wait := ms.holding()
	if wait <= 0 {
		return nil
	}
	hold := &ms.startedAlone
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		hold.over.Store(true)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %s", contract.ErrNoLeader, hold.reason())
	}
}

// holding returns how much longer this node holds its calls
// (awaitDialers), or 0 when it no longer does.
func (ms *members) holding() time.Duration {
	hold := &ms.startedAlone
	if hold.over.Load() {
		return 0
	}
	wait := time.Until(*hold.until.Load())
	if wait <= 0 || ms.otherVoters() > 0 {
		hold.over.Store(true)
		return 0
	}
	return wait
}

// holdReason says, while this node holds its calls (holding), why.
func (ms *members) holdReason() string {
	if ms.holding() <= 0 {
		return ""
	}
	return ms.startedAlone.reason()
}

// reason says why calls wait for the hold to end.
func (h *startupHold) reason() string {
	return fmt.Sprintf("starting: a cluster's only voter decides nothing in its first %v, so that any cluster that still counts this address as a member's can reach it first", h.length)
}

// foreignWithin is how long after a node of another cluster dialed this
// one it says it is not ready.
const foreignWithin = 30 * time.Second

// foreignReason says, when nodes of another cluster dialed this node
// lately and it is its cluster's only voter, that they count its address as
// theirs: it was probably started on another (one-node) cluster's data
// directory, and would answer that cluster's decisions to their callers.
// A node with other voters is not told so: a node on a directory of a
// larger cluster finds none of its peers and waits for a quorum (not ready
// anyway), and no stranger that dials a healthy cluster makes it unready.
func (ms *members) foreignReason() string {
	other, ok := ms.foreignDialer(foreignWithin)
	if !ok || ms.otherVoters() > 0 {
		return ""
	}
	return fmt.Sprintf("nodes of cluster %s dial this node, which belongs to cluster %s: its data directory is probably not the one it should run on (it refuses them, and they it)", other, ms.records.ClusterID())
}

// otherVoters counts the voters of the latest configuration this node
// knows, itself left out.
func (ms *members) otherVoters() int {
	future := ms.raft.GetConfiguration()
	if future.Error() != nil {
		return 0
	}
	count := 0
	for _, s := range future.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != ms.selfID {
			count++
		}
	}
	return count
}

// join is Join on the leader.
func (ms *members) join(ctx context.Context, m contract.Member, change contract.MemberChange) error {
	servers, err := configuration(ms.raft)
	if err != nil {
		return err
	}
	present := false
	var stale []raft.Server
	for _, s := range servers {
		sameID, sameAddr := string(s.ID) == m.ID, string(s.Address) == m.RaftAddr
		switch {
		case sameID && sameAddr:
			present = true
		case sameID || sameAddr:
			stale = append(stale, s)
		}
	}
	if !present {
		if err := ms.ping(m); err != nil {
			return err
		}
		if err := ms.checkReplacement(m, stale, change); err != nil {
			return err
		}
		if err := ms.applyJoin(m, servers, stale, change); err != nil {
			return err
		}
		ms.audit(ctx, contract.AuditMemberJoin, m.ID, joinDetail(m, change))
	}
	if ms.httpAddrOf(m.ID) == m.HTTPAddr {
		return nil
	}
	return ms.apply(fsm.CommandSetNode, &fsm.NodeCommand{ID: m.ID, HTTPAddr: m.HTTPAddr})
}

// checkReplacement refuses a join that would evict a running member: one
// recorded with m's ID at another address that still answers there as m.ID.
func (ms *members) checkReplacement(m contract.Member, stale []raft.Server, change contract.MemberChange) error {
	if change.Replace {
		return nil
	}
	for _, s := range stale {
		if string(s.ID) == m.ID && ms.answersAs(string(s.Address), m.ID) {
			return contract.Conflict("id", "member %q is running at %s: a second node with its ID would evict it; give the new node another ID, or replace the member on purpose (join with \"replace\": true; limitnode -replace)", m.ID, s.Address)
		}
	}
	return nil
}

// applyJoin removes the stale entries and adds m, each step only if the
// configuration it leaves has a quorum of answering voters (m has just
// answered its ping).
func (ms *members) applyJoin(m contract.Member, servers, stale []raft.Server, change contract.MemberChange) error {
	remaining := slices.DeleteFunc(slices.Clone(servers), func(s raft.Server) bool { return slices.Contains(stale, s) })
	joined := append(slices.Clone(remaining), raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr)})
	if !change.Force {
		if len(stale) > 0 {
			if err := ms.checkQuorum(remaining, fmt.Sprintf("replacing the entry of %s", health.DescribeServers(stale)), joinForce(m)); err != nil {
				return err
			}
		}
		if err := ms.checkQuorum(joined, fmt.Sprintf("adding %q", m.ID), joinForce(m)); err != nil {
			return err
		}
	}
	for _, s := range stale {
		ms.logger.Info("removing a member before it rejoins", "id", s.ID, "raft_addr", s.Address)
		if err := ms.raft.RemoveServer(s.ID, 0, 0).Error(); err != nil {
			return translate(err)
		}
	}
	if err := ms.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr), 0, 0).Error(); err != nil {
		return translate(err)
	}
	ms.logger.Info("member joined", "id", m.ID, "raft_addr", m.RaftAddr, "http_addr", m.HTTPAddr, "replace", change.Replace, "force", change.Force)
	return nil
}

// joinDetail is a join's record in the audit trail.
func joinDetail(m contract.Member, change contract.MemberChange) string {
	detail := "raft " + m.RaftAddr
	if m.HTTPAddr != "" {
		detail += ", http " + m.HTTPAddr
	}
	if change.Replace {
		detail += ", replace"
	}
	if change.Force {
		detail += ", force"
	}
	return detail
}

// remove is RemoveMember on the leader.
func (ms *members) remove(ctx context.Context, id string, change contract.MemberChange) error {
	servers, err := configuration(ms.raft)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(servers, func(s raft.Server) bool { return string(s.ID) == id })
	if i < 0 {
		return contract.NotFound("id", "no member %q", id)
	}
	if !change.Force {
		if err := ms.checkQuorum(slices.Delete(slices.Clone(servers), i, i+1), fmt.Sprintf("removing %q", id), "limitnode remove -force "+id); err != nil {
			return err
		}
	}
	// Record it and forget the address first: once the leader removes
	// itself it can no longer append anything.
	detail := ""
	if change.Force {
		detail = "force"
	}
	ms.audit(ctx, contract.AuditMemberRemove, id, detail)
	if err := ms.apply(fsm.CommandRemoveNode, &fsm.NodeCommand{ID: id}); err != nil {
		return err
	}
	if err := ms.raft.RemoveServer(raft.ServerID(id), 0, 0).Error(); err != nil {
		return translate(err)
	}
	ms.logger.Info("member removed", "id", id, "force", change.Force)
	return nil
}

// checkQuorum refuses a change (what) that would leave servers with fewer
// voters answering now than a quorum of them: the cluster could then decide
// nothing until the others came back. This node counts as answering; every
// other voter is pinged. The refusal names forceCommand, the command line
// that makes the change anyway.
func (ms *members) checkQuorum(servers []raft.Server, what, forceCommand string) error {
	voters := health.Voters(servers)
	silent := ms.silent(voters)
	quorum := len(voters)/2 + 1
	if answering := len(voters) - len(silent); answering >= quorum {
		return nil
	}
	detail := ""
	if len(silent) > 0 {
		detail = " (not answering: " + health.DescribeServers(silent) + ")"
	}
	return contract.Conflict("id", "%s would leave %d of %d voters answering, fewer than a quorum of %d%s: the cluster would decide nothing until they are back; bring them back first, or force the change (\"force\": true; %s)",
		what, len(voters)-len(silent), len(voters), quorum, detail, forceCommand)
}

// joinForce is the command line that forces m's join.
func joinForce(m contract.Member) string {
	return fmt.Sprintf("limitnode join -force -id %s -raft %s", m.ID, m.RaftAddr)
}

// silent pings every server but this node at once and returns those
// that do not answer as themselves within pingTimeout.
func (ms *members) silent(servers []raft.Server) []raft.Server {
	answered := make([]bool, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		if string(s.ID) == ms.selfID {
			answered[i] = true
			continue
		}
		wg.Go(func() { answered[i] = ms.answersAs(string(s.Address), string(s.ID)) })
	}
	wg.Wait()
	var silent []raft.Server
	for i, s := range servers {
		if !answered[i] {
			silent = append(silent, s)
		}
	}
	return silent
}

// followLeadership reacts to a change of leader (now at leaderAddr) or of
// membership: it drops pooled forwarding connections to the old leader,
// notes whether this node is still a member (members.track), lets the
// leader append the cluster's ID and abort a restore an earlier leader
// abandoned, and makes sure the replicated state knows this node's HTTP
// address. It records the address only, never adds the node: a member that
// was removed stays out until an operator joins it.
func (n *Node) followLeadership(leaderAddr raft.ServerAddress) {
	n.fwd.dropExcept(string(leaderAddr))
	member := n.members.track()
	if n.IsLeader() {
		n.identity.EnsureAppended(n.raft.CurrentTerm(), n.fsm.ClusterID(), func(id string) error {
			return n.replica.applyCommand(fsm.CommandSetClusterID, &fsm.ClusterIDCommand{ID: id})
		})
		n.restorer.abandoned()
	}
	if leaderAddr != "" && n.cfg.HTTPAddr != "" && n.fsm.NodeHTTPAddr(n.cfg.ID) != n.cfg.HTTPAddr && member {
		ctx, cancel := context.WithTimeout(context.Background(), n.requestTimeout)
		defer cancel()
		self := contract.Member{ID: n.cfg.ID, RaftAddr: n.advertise, HTTPAddr: n.cfg.HTTPAddr}
		if err := n.route.op(ctx, &forwardRequest{Op: opRegister, Member: self}, func() error { return n.members.register(self) }); err != nil {
			n.logger.Debug("recording this node's HTTP address", "err", err)
		}
	}
}

// observeLeadership calls onChange with the leader r knows, at once, then
// on each change of leader r observes and at least every second (a
// membership change comes with no observation), until stop closes.
func observeLeadership(r *raft.Raft, stop <-chan struct{}, onChange func(leaderAddr raft.ServerAddress)) {
	observations := make(chan raft.Observation, 16)
	observer := raft.NewObserver(observations, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(observer)
	defer r.DeregisterObserver(observer)
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-stop:
				return
			case <-observations:
			case <-ticker.C:
			}
		}
		addr, _ := r.LeaderWithID()
		onChange(addr)
	}
}

// configWatch is the state machine as Raft sees it, telling the node of
// each configuration entry it applies that names the node: its data
// directory then records that it is a member (identity.Records.RecordMember), before any
// later entry can remove it, so that a node removed within a watcher's tick
// of joining says it was removed, not that it has yet to join.
type configWatch struct {
	*timedFSM
	selfID  string
	records *identity.Records
}

func (w *configWatch) ApplyBatch(logs []*raft.Log) []any {
	for _, l := range logs {
		if l.Type != raft.LogConfiguration {
			continue
		}
		for _, s := range raft.DecodeConfiguration(l.Data).Servers {
			if string(s.ID) == w.selfID {
				w.records.RecordMember()
			}
		}
	}
	return w.timedFSM.ApplyBatch(logs)
}

// pingTimeout bounds one check that a member answers: before a member is
// added, and for each voter before a change that could cost a quorum.
const pingTimeout = 2 * time.Second

// ping checks, before a member is added, that its Raft address answers as
// the limitnode node it claims to be: a voter that cannot be reached (a
// typo, a node not started, a certificate of another CA) would count toward
// the quorum and could cost the cluster its majority.
func (ms *members) ping(m contract.Member) error {
	id, err := ms.identify(m.RaftAddr)
	switch {
	case errors.Is(err, ErrForeignCluster):
		return contract.Conflict("raft_addr", "%v: a node whose data directory holds another cluster's state cannot join this one; give it an empty data directory", err)
	case err != nil:
		return contract.Invalid("raft_addr", "%s does not answer as a limitnode node (start it first; with TLS, its certificate must be signed by the cluster's CA): %v", m.RaftAddr, err)
	case id != m.ID:
		return contract.Invalid("id", "the node at %s is %q, not %q: check the Raft address", m.RaftAddr, id, m.ID)
	}
	return nil
}

// answersAs reports whether the node at addr answers the ping as id.
func (ms *members) answersAs(addr, id string) bool {
	got, err := ms.identify(addr)
	return err == nil && got == id
}

// identify asks the node at addr, over the forwarding protocol (and its
// mutual TLS), for its ID.
func (ms *members) identify(addr string) (string, error) {
	conn, err := ms.dialer.Open(addr, transport.ProtocolForward, pingTimeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(pingTimeout))
	fc := transport.NewConn(conn)
	var resp forwardResponse
	if err := fc.Write(&forwardRequest{Op: opPing}); err != nil {
		return "", err
	}
	if err := fc.Read(&resp); err != nil {
		return "", err
	}
	return resp.NodeID, nil
}

// pingWith is the health round's ping of a member, sent with pinger over
// the forwarding protocol.
func pingWith(pinger *forwarder) func(ctx context.Context, addr string, view []health.Member, leaderApplied uint64) (health.Answer, error) {
	return func(ctx context.Context, addr string, view []health.Member, leaderApplied uint64) (health.Answer, error) {
		resp, err := pinger.send(ctx, addr, &forwardRequest{Op: opPing, Health: view, LeaderApplied: leaderApplied})
		if err != nil {
			return health.Answer{}, err
		}
		return health.Answer{NodeID: resp.NodeID, AppliedIndex: resp.AppliedIndex, Checkpoint: resp.Checkpoint}, nil
	}
}

// register records the HTTP address of a node that is a member at
// its Raft address; a node that is not (it was removed) is refused, so that
// only Join adds voters.
func (ms *members) register(m contract.Member) error {
	future := ms.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return translate(err)
	}
	for _, s := range future.Configuration().Servers {
		if string(s.ID) == m.ID && string(s.Address) == m.RaftAddr {
			if ms.httpAddrOf(m.ID) == m.HTTPAddr {
				return nil
			}
			return ms.apply(fsm.CommandSetNode, &fsm.NodeCommand{ID: m.ID, HTTPAddr: m.HTTPAddr})
		}
	}
	return contract.NotFound("id", "%q at %s is not a member; join it first", m.ID, m.RaftAddr)
}

// isMember reports whether this node is in the latest configuration it
// knows. A node that was removed (and has learnt so) is not.
func (ms *members) isMember() bool {
	future := ms.raft.GetConfiguration()
	if future.Error() != nil {
		return false
	}
	for _, s := range future.Configuration().Servers {
		if string(s.ID) == ms.selfID {
			return true
		}
	}
	return false
}

// TransferLeadership hands leadership over to the member to (any other
// voter, when to is ""), and waits until this node knows it has taken it:
// a transfer that ends with another leader than to, or with the same one,
// is ErrOutcomeUnknown once ctx ends (Raft handed over, and someone else
// won the election). A non-voter cannot lead: naming one is invalid. A
// voter that does not take over within the election timeout (it trails the
// log, or does not answer) is a conflict naming it (see transferRefused).
// Any member may be asked; a follower passes it to the leader.
func (n *Node) TransferLeadership(ctx context.Context, to string) error {
	if to != "" {
		if err := contract.ValidateNodeID(to); err != nil {
			return err
		}
	}
	_, before := n.raft.LeaderWithID()
	if err := n.route.op(ctx, &forwardRequest{Op: opTransfer, Member: contract.Member{ID: to}, Actor: contract.ActorOf(ctx)}, func() error { return n.members.transfer(ctx, to) }); err != nil {
		return err
	}
	// Answer once this node knows the new leader, so the caller's next
	// question finds it.
	ctx, cancel := n.route.withDeadline(ctx)
	defer cancel()
	for {
		_, id := n.raft.LeaderWithID()
		if id != "" && (string(id) == to || to == "" && id != before) {
			return nil
		}
		select {
		case <-ctx.Done():
			if id == "" {
				id = "none known"
			}
			return fmt.Errorf("%w: leadership was handed over, but the leader this node knows is %s, not %s", contract.ErrOutcomeUnknown, id, cmp.Or(to, "another voter"))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// transfer is TransferLeadership on the leader: it hands over to to, or
// to any other voter when to is "".
func (ms *members) transfer(ctx context.Context, to string) error {
	if to == ms.selfID {
		return nil // it leads already
	}
	// Recorded before the hand-over: a leader that has handed over can
	// append nothing.
	if to == "" {
		if ms.otherVoters() == 0 {
			return contract.Invalid("to", "there is no other voter to hand leadership to")
		}
		ms.audit(ctx, contract.AuditLeadershipTransfer, "", "from "+ms.selfID+" to any other voter")
		return ms.transferRefused(to, ms.raft.LeadershipTransfer().Error())
	}
	future := ms.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return translate(err)
	}
	for _, s := range future.Configuration().Servers {
		if string(s.ID) != to {
			continue
		}
		if s.Suffrage != raft.Voter {
			// Raft would send it TimeoutNow all the same: it stands for
			// election, cannot win, and its term unseats this leader.
			return contract.Invalid("to", "%q is not a voter, so it cannot lead (a member whose state differed from the leader's at a checkpoint is a non-voter until one agrees)", to)
		}
		ms.audit(ctx, contract.AuditLeadershipTransfer, to, "from "+ms.selfID)
		return ms.transferRefused(to, ms.raft.LeadershipTransferToServer(s.ID, s.Address).Error())
	}
	return contract.NotFound("to", "no member %q", to)
}

// transferRefused is the answer to a hand-over to to ("": any other voter)
// that Raft ended with err. Raft's own failures (the target did not catch
// up with the log, or did not answer its TimeoutNow, within the election
// timeout) say what state the target is in, not that the node failed: they
// are a 409 naming to, which the operator can act on. Raft's sentinels keep
// their translation (not the leader: retried; shut down).
func (ms *members) transferRefused(to string, err error) error {
	if err == nil || notApplied(err) || errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, raft.ErrLeadershipLost) {
		return translate(err)
	}
	if to == "" {
		return contract.Conflict("", "no other voter took over leadership from %s within the election timeout (raft: %v): they trail its log or do not answer. Retry once one has caught up (GET /v1/cluster shows each member's health)", ms.selfID, err)
	}
	return contract.Conflict("to", "%s did not take over leadership from %s within the election timeout (raft: %v): it trails the leader's log or does not answer. Retry once it has caught up (GET /v1/cluster shows each member's health)", to, ms.selfID, err)
}
