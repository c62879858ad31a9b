package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/limitnode/limitnode/cluster/internal/consistency"
	"github.com/limitnode/limitnode/cluster/internal/health"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/transport"
)

// The forwarding protocol runs over the Raft address (package transport). A
// connection carries request/response pairs in turn, each a msgpack value;
// a follower keeps a small pool of connections to the leader, and its
// batcher sends one message per batch, so under load one round trip carries
// many requests.
//
// A replicated command other than a decision travels as it will be
// appended (opCommand: fsm.Encode's bytes), so a new command needs no new
// field or case here: the leader reads it with fsm.DecodeRequest, which
// knows every command a member may ask for. The other operations are the
// leader's own work (membership, statistics), not log entries.
//
// Nodes of different versions: an operation number is never reused, and a
// node answers one it does not know with statusFailed, naming it. The
// message layout is positional msgpack, so a message with fields a node
// does not know fails to decode there: nodes of builds whose messages
// differ cannot forward to each other, and are upgraded together (stop
// every node, start them on the new build; their state is kept).
//
// Every connection on the Raft port, Raft's and forwarding's, begins with
// the transport's hello naming the cluster's ID (package transport's
// hello.go). Builds from before the hello send none, so they cannot talk to
// this build at all, for Raft either: a cluster is moved onto this build by
// stopping every node and starting them all on it. Their state is kept, and
// the first leader gives a cluster that has no ID yet one (cluster/internal/identity).

type forwardOp uint8

// The operations. Numbers 4 to 7, 12, 13 and 15 named the commands that
// opCommand carries now; they stay unused.
const (
	opAllow  forwardOp = 1
	opJoin   forwardOp = 2
	opRemove forwardOp = 3
	// opPing asks a node who it is; the leader pings a member before it
	// adds it, so that only a running limitnode node (with a certificate of
	// the cluster's CA, when the Raft port speaks TLS) becomes a voter.
	opPing forwardOp = 8
	// opRegister records a member's HTTP address; it never adds one.
	opRegister forwardOp = 9
	// opConsistency runs a consistency check on the leader.
	opConsistency forwardOp = 10
	// opTransfer hands leadership over (Member.ID: to whom, or "").
	opTransfer forwardOp = 11
	// opStats asks the leader for its decision statistics (Top: how many
	// heavy hitters), which include the denials it answered without an
	// entry.
	opStats forwardOp = 14
	// opCommand asks the leader to append Command, an encoded fsm command.
	opCommand forwardOp = 16
	// opLocalStats asks a member, from the leader, for the statistics of
	// what it answered on its own (deny leases, shares; Top: how many
	// heavy hitters).
	opLocalStats forwardOp = 17
	// opReadIndex asks the leader for a read index (readindex.go): its
	// commit index, once a round of heartbeats confirmed it leads; the
	// answer's AppliedIndex carries it.
	opReadIndex forwardOp = 18
)

type forwardRequest struct {
	Op       forwardOp
	Requests []fsm.Request         // for opAllow
	Command  []byte                // for opCommand
	Member   contract.Member       // for opJoin; only ID for opRemove and opTransfer
	Change   contract.MemberChange // for opJoin and opRemove
	Health   []health.Member       // for opPing from the leader: its view of the members
	Top      int                   // for opStats
	// Actor is who asked for opJoin, opRemove or opTransfer
	// (contract.ActorOf), for the audit trail.
	Actor string
	// LeaderApplied is, for opPing from the leader, the leader's applied
	// index as it sends (health.Progress).
	LeaderApplied uint64
}

// forwardStatus tells the follower what happened to its message, so that it
// knows whether it may send it again.
type forwardStatus uint8

const (
	statusOK forwardStatus = iota
	// statusNotLeader: the receiver is not the leader and did nothing; the
	// follower may send the message to the leader it now knows.
	statusNotLeader
	// statusUnknown: the outcome is unknown (leadership was lost after the
	// entry was appended, or the receiver is shutting down).
	statusUnknown
	// statusFailed: the operation failed and did nothing (a bad join).
	statusFailed
	// statusRejected: the message was refused as it stands and did
	// nothing; Rejection says why.
	statusRejected
)

type forwardResponse struct {
	Status    forwardStatus
	Error     string
	Rejection *contract.Error // for statusRejected
	Results   []fsm.Result    // for opAllow
	// Result is an opCommand's apply response, msgpack-encoded, when the
	// command answers with one (a lease command's fsm.LeaseResult).
	Result       []byte
	NodeID       string                      // for opPing: the answering node's ID
	AppliedIndex uint64                      // for opPing: the answering node's applied index; for opReadIndex: the read index
	Checkpoint   consistency.Checkpoint      // for opPing: the answering node's latest digest
	Consistency  *contract.ConsistencyReport // for opConsistency
	Stats        *contract.Stats             // for opStats
}

// forwardServer answers the forwarding messages that reach this node,
// one connection at a time per goroutine, and closes the connections it
// serves when the node stops.
type forwardServer struct {
	handle func(*forwardRequest) *forwardResponse
	logger *slog.Logger
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// serve answers forwarded messages on ln until it is closed.
func (s *forwardServer) serve(ln net.Listener) {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		s.track(conn, true)
		conns.Go(func() {
			defer s.track(conn, false)
			defer conn.Close()
			fc := transport.NewConn(conn)
			for {
				var req forwardRequest
				if err := fc.Read(&req); err != nil {
					if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
						s.logger.Debug("cluster: closing a forwarding connection", "remote", conn.RemoteAddr().String(), "err", err)
					}
					return
				}
				if err := fc.Write(s.handle(&req)); err != nil {
					return
				}
			}
		})
	}
}

func (s *forwardServer) track(c net.Conn, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = make(map[net.Conn]struct{})
	}
	if add {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

// closeConns closes every connection being served.
func (s *forwardServer) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// handleForward answers one forwarded message.
func (n *Node) handleForward(req *forwardRequest) *forwardResponse {
	ctx, cancel := context.WithTimeout(context.Background(), n.requestTimeout)
	defer cancel()
	switch req.Op {
	case opAllow:
		return n.commit.decideForwarded(ctx, req.Requests)
	case opJoin:
		return replyTo(n.Join(contract.WithActor(ctx, req.Actor), req.Member, req.Change))
	case opRemove:
		return replyTo(n.RemoveMember(contract.WithActor(ctx, req.Actor), req.Member.ID, req.Change))
	case opCommand:
		if !n.IsLeader() {
			return &forwardResponse{Status: statusNotLeader}
		}
		result, err := n.route.applyRequested(req.Command)
		resp := replyTo(err)
		if err == nil && result != nil {
			if resp.Result, err = encodeResult(result); err != nil {
				return replyTo(err)
			}
		}
		return resp
	case opPing:
		if len(req.Health) > 0 && !n.IsLeader() {
			n.health.Receive(req.Health)
			n.progress.Note(req.LeaderApplied, time.Now())
		}
		return &forwardResponse{NodeID: n.cfg.ID, AppliedIndex: n.raft.AppliedIndex(), Checkpoint: n.digests.Latest()}
	case opConsistency:
		if !n.IsLeader() {
			return &forwardResponse{Status: statusNotLeader}
		}
		report, err := checkConsistencyAsLeader(ctx, n.raft, n.cfg.ID, &n.digests, n.fwd.dialer, n.requestTimeout, n.replica.awaitApplied)
		resp := replyTo(err)
		resp.Consistency = &report
		return resp
	case opTransfer:
		return replyTo(n.TransferLeadership(contract.WithActor(ctx, req.Actor), req.Member.ID))
	case opStats:
		if !n.IsLeader() {
			return &forwardResponse{Status: statusNotLeader}
		}
		st := n.statistics.cluster(context.Background(), min(max(req.Top, 0), contract.StatsTopCounters))
		return &forwardResponse{Stats: &st}
	case opLocalStats:
		st := n.answeredHere.snapshot(min(max(req.Top, 0), contract.StatsTopCounters))
		return &forwardResponse{Stats: &st}
	case opReadIndex:
		index, err := n.replica.leaderReadIndex(ctx)
		resp := replyTo(err)
		resp.AppliedIndex = index
		return resp
	case opRegister:
		if !n.IsLeader() {
			return &forwardResponse{Status: statusNotLeader}
		}
		return replyTo(n.members.register(req.Member))
	default:
		return &forwardResponse{Status: statusFailed, Error: fmt.Sprintf("unknown forwarding operation %d", req.Op)}
	}
}

// refuseInvalid checks forwarded requests before any reaches the log, as
// Node.Allow checks its caller's: refused holds the refusals (nil when
// there are none), valid the requests to decide, and index where each of
// those answers in refused. A follower of this build checks them too; this
// keeps a hand-built message, or another build's, from making an entry of
// what the FSM would refuse.
func refuseInvalid(reqs []fsm.Request) (refused []fsm.Result, valid []fsm.Request, index []int) {
	for i := range reqs {
		if err := reqs[i].Validate(); err != nil {
			if refused == nil {
				refused = make([]fsm.Result, len(reqs))
			}
			refused[i] = fsm.Result{Rejection: err}
		}
	}
	if refused == nil {
		return nil, reqs, nil
	}
	for i := range reqs {
		if refused[i].Rejection == nil {
			valid = append(valid, reqs[i])
			index = append(index, i)
		}
	}
	return refused, valid, index
}

// replyTo answers an operation that returns only an error.
func replyTo(err error) *forwardResponse {
	if err == nil {
		return &forwardResponse{}
	}
	if rej := contract.As(err); rej != nil {
		return &forwardResponse{Status: statusRejected, Rejection: rej}
	}
	return &forwardResponse{Status: statusFor(err), Error: err.Error()}
}

func statusFor(err error) forwardStatus {
	switch {
	case errors.Is(err, errNotLeader):
		return statusNotLeader
	case contract.As(err) != nil:
		return statusRejected
	case errors.Is(err, contract.ErrOutcomeUnknown), errors.Is(err, contract.ErrShutdown):
		return statusUnknown
	default:
		return statusFailed
	}
}

// errorFor turns a forwarded reply back into this package's errors.
func errorFor(resp *forwardResponse) error {
	switch resp.Status {
	case statusOK:
		return nil
	case statusNotLeader:
		return errNotLeader
	case statusUnknown:
		return fmt.Errorf("%w: %s", contract.ErrOutcomeUnknown, resp.Error)
	case statusRejected:
		if resp.Rejection == nil {
			return errors.New("leader: a rejection without its reason")
		}
		return resp.Rejection
	default:
		return fmt.Errorf("leader: %s", resp.Error)
	}
}

// forwarder sends forwarding messages to other nodes over pooled
// connections.
type forwarder struct {
	pool   *transport.Pool
	dialer transport.Dialer
}

func newForwarder(d transport.Dialer, dialTimeout time.Duration) *forwarder {
	return &forwarder{pool: transport.NewPool(d, transport.ProtocolForward, dialTimeout), dialer: d}
}

// send delivers one message and returns the reply. An error wrapping
// transport.ErrNotSent means the receiver cannot have acted; any other
// error leaves the outcome unknown.
func (f *forwarder) send(ctx context.Context, addr string, req *forwardRequest) (*forwardResponse, error) {
	var resp forwardResponse
	if err := f.pool.Exchange(ctx, addr, req, &resp); err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	return &resp, nil
}

// dropExcept closes pooled connections to every address but keep.
func (f *forwarder) dropExcept(keep string) { f.pool.DropExcept(keep) }

func (f *forwarder) close() { f.pool.Close() }
