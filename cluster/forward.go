package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
	"github.com/limitnode/limitnode/internal/transport"
	"github.com/limitnode/limitnode/rls"
)

// The forwarding protocol runs over the Raft address (package transport). A
// connection carries request/response pairs in turn, each a msgpack value;
// a follower keeps a small pool of connections to the leader, and its
// batcher sends one message per batch, so under load one round trip carries
// many requests.

type forwardOp uint8

const (
	opAllow forwardOp = iota + 1
	opJoin
	opRemove
	opPutPolicy
	opDeletePolicy
	opAcquireLease
	opReleaseLease
	// opPing asks a node who it is; the leader pings a member before it
	// adds it, so that only a running limitnode node (with a certificate of
	// the cluster's CA, when the Raft port speaks TLS) becomes a voter.
	opPing
	// opRegister records a member's HTTP address; it never adds one.
	opRegister
	// opConsistency runs a consistency check on the leader.
	opConsistency
	// opTransfer hands leadership over (Member.ID: to whom, or "").
	opTransfer
	opPutRLSConfig
	opDeleteRLSConfig
	// opStats asks the leader for its decision statistics (Top: how many
	// heavy hitters), which include the denials it answered without an
	// entry.
	opStats
	// opRenewLease moves a held lease's expiry (Lease: ID and TTL).
	opRenewLease
)

type forwardRequest struct {
	Op       forwardOp
	Requests []fsm.Request
	Member   contract.Member       // for opJoin; only ID for opRemove
	Policy   contract.Policy       // for opPutPolicy; only Name for opDeletePolicy
	Lease    fsm.LeaseCommand      // for opAcquireLease; ID and TTL for opRenewLease; only ID for opReleaseLease
	Health   []memberHealth        // for opPing from the leader: its view of the members
	RLS      *rls.Config           // for opPutRLSConfig; only Domain for opDeleteRLSConfig
	Top      int                   // for opStats
	Change   contract.MemberChange // for opJoin and opRemove
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
	Status       forwardStatus
	Error        string
	Rejection    *contract.Error // for statusRejected
	Results      []fsm.Result
	Lease        *fsm.LeaseResult            // for opAcquireLease, opRenewLease and opReleaseLease
	NodeID       string                      // for opPing: the answering node's ID
	AppliedIndex uint64                      // for opPing: the answering node's applied index
	Checkpoint   checkpoint                  // for opPing: the answering node's latest digest
	Consistency  *contract.ConsistencyReport // for opConsistency
	Stats        *contract.Stats             // for opStats
}

// serveForwarding answers forwarded messages on ln until it is closed.
func (n *Node) serveForwarding(ln net.Listener) {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		n.trackConn(conn, true)
		conns.Go(func() {
			defer n.trackConn(conn, false)
			defer conn.Close()
			fc := transport.NewConn(conn)
			for {
				var req forwardRequest
				if err := fc.Read(&req); err != nil {
					if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
						n.logger.Debug("cluster: closing a forwarding connection", "remote", conn.RemoteAddr().String(), "err", err)
					}
					return
				}
				if err := fc.Write(n.handleForward(&req)); err != nil {
					return
				}
			}
		})
	}
}

func (n *Node) handleForward(req *forwardRequest) *forwardResponse {
	ctx, cancel := context.WithTimeout(context.Background(), n.requestTimeout)
	defer cancel()
	switch req.Op {
	case opAllow:
		if !n.isLeader() {
			return &forwardResponse{Status: statusNotLeader}
		}
		if l := loadOf(req.Requests); !l.within(n.forwardedLimit()) {
			return replyTo(contract.Invalid("requests", "a forwarded message of %d requests and %d checks is over this leader's limit", l.requests, l.checks))
		}
		if results, ok := n.denyFast(ctx, req.Requests); ok {
			return &forwardResponse{Results: results}
		}
		results, _, err := n.submitToLog(ctx, req.Requests)
		if err != nil {
			return replyTo(err)
		}
		return &forwardResponse{Results: results}
	case opJoin:
		return replyTo(n.Join(ctx, req.Member, req.Change))
	case opRemove:
		return replyTo(n.RemoveMember(ctx, req.Member.ID, req.Change))
	case opPutPolicy:
		return replyTo(n.PutPolicy(ctx, req.Policy))
	case opDeletePolicy:
		return replyTo(n.DeletePolicy(ctx, req.Policy.Name))
	case opPutRLSConfig, opDeleteRLSConfig:
		if req.RLS == nil {
			return &forwardResponse{Status: statusFailed, Error: "no RLS configuration in the message"}
		}
		if req.Op == opPutRLSConfig {
			return replyTo(n.PutRLSConfig(ctx, *req.RLS))
		}
		return replyTo(n.DeleteRLSConfig(ctx, req.RLS.Domain))
	case opAcquireLease, opRenewLease, opReleaseLease:
		if !n.isLeader() {
			return &forwardResponse{Status: statusNotLeader}
		}
		result, err := n.leaseAsLeader(req.Op, req.Lease)
		resp := replyTo(err)
		resp.Lease = result
		return resp
	case opPing:
		if len(req.Health) > 0 && !n.isLeader() {
			n.health.set(req.Health, time.Now())
			n.noteDivergence(req.Health)
		}
		return &forwardResponse{NodeID: n.cfg.ID, AppliedIndex: n.raft.AppliedIndex(), Checkpoint: n.checkpoints.latest()}
	case opConsistency:
		if !n.isLeader() {
			return &forwardResponse{Status: statusNotLeader}
		}
		report, err := n.checkConsistencyAsLeader(ctx)
		resp := replyTo(err)
		resp.Consistency = &report
		return resp
	case opTransfer:
		return replyTo(n.TransferLeadership(ctx, req.Member.ID))
	case opStats:
		if !n.isLeader() {
			return &forwardResponse{Status: statusNotLeader}
		}
		st := n.stats.snapshot(min(max(req.Top, 0), contract.StatsTopCounters))
		return &forwardResponse{Stats: &st}
	case opRegister:
		if !n.isLeader() {
			return &forwardResponse{Status: statusNotLeader}
		}
		return replyTo(n.registerAsLeader(req.Member))
	default:
		return &forwardResponse{Status: statusFailed, Error: fmt.Sprintf("unknown forwarding operation %d", req.Op)}
	}
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

func (n *Node) trackConn(c net.Conn, add bool) {
	n.connsMu.Lock()
	defer n.connsMu.Unlock()
	if add {
		n.conns[c] = struct{}{}
	} else {
		delete(n.conns, c)
	}
}

// forwardedLimit bounds what the leader accepts in one forwarded message:
// generous, so that a follower configured with larger entries is still
// served, and bounded, so that one message cannot become an entry that
// stalls the cluster.
func (n *Node) forwardedLimit() load {
	return load{requests: 4 * n.cfg.MaxBatchRequests, checks: 4 * n.cfg.MaxBatchChecks, bytes: transport.MaxFrameBytes}
}

// forwarder sends forwarding messages to other nodes over pooled
// connections.
type forwarder struct {
	pool   *transport.Pool
	dialer transport.Dialer
}

func newForwarder(d transport.Dialer, dialTimeout time.Duration) *forwarder {
	return &forwarder{pool: transport.NewPool(d, protocolForward, dialTimeout), dialer: d}
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
