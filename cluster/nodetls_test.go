package cluster_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/testenv"
	"github.com/limitnode/limitnode/testcluster"
)

// strangerStream is a raft.StreamLayer that dials with TLS of its own (or
// none) and announces Raft, as a forged peer would.
type strangerStream struct {
	net.Listener
	tls *tls.Config
}

func (s *strangerStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if s.tls != nil {
		tc := tls.Client(conn, s.tls)
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	if _, err := conn.Write([]byte{'R'}); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// TestStrangersCannotTalkToATLSCluster: a node without a certificate, and
// one with a certificate of another CA, can neither join the cluster, nor
// add a member to their own, nor forward a request, nor send Raft an
// AppendEntries with a higher term; the cluster keeps serving.
func TestStrangersCannotTalkToATLSCluster(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, 3, testcluster.Options{Secure: true})
	leader := c.WaitLeader()
	otherCA, err := testcluster.OtherCA("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	limit := algorithms.Limit{Rate: 100, Period: time.Minute, Burst: 100}
	strangers := []struct {
		name string
		tls  *cluster.NodeTLS
	}{{"no certificate", nil}, {"a certificate of another CA", otherCA}}
	for _, s := range strangers {
		t.Run(s.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stranger, err := cluster.Open(cluster.Config{ID: "stranger", RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(), Bootstrap: true, NodeTLS: s.tls})
			if err != nil {
				t.Fatal(err)
			}
			defer stranger.Close()

			err = leader.Node().Join(ctx, contract.Member{ID: "stranger", RaftAddr: stranger.RaftAddr()}, contract.MemberChange{})
			if !errors.Is(err, contract.ErrInvalid) {
				t.Errorf("the cluster added the stranger: %v", err)
			}
			waitLeads(t, stranger)
			member := c.Followers()[0]
			if err := stranger.Join(ctx, contract.Member{ID: member.ID, RaftAddr: member.RaftAddr}, contract.MemberChange{}); !errors.Is(err, contract.ErrInvalid) {
				t.Errorf("the stranger added a member of the cluster: %v", err)
			}
			req := contract.Request{Checks: []contract.Check{{Key: "victim", Limit: limit, Cost: 100}}}
			if err := stranger.ForwardAllowTo(ctx, leader.RaftAddr, req); err == nil {
				t.Error("the leader decided a request the stranger forwarded")
			}

			var peerTLS *tls.Config
			if s.tls != nil {
				peerTLS = &tls.Config{Certificates: []tls.Certificate{*s.tls.Certificate()}, InsecureSkipVerify: true}
			}
			ln, _ := net.Listen("tcp", "127.0.0.1:0")
			transport := raft.NewNetworkTransport(&strangerStream{Listener: ln, tls: peerTLS}, 1, time.Second, nil)
			defer transport.Close()
			term := leader.Node().Status().Term
			var resp raft.AppendEntriesResponse
			args := raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("stranger"), Addr: []byte(ln.Addr().String())}, Term: term + 10, PrevLogEntry: 0, LeaderCommitIndex: 0}
			if err := transport.AppendEntries("n1", raft.ServerAddress(leader.RaftAddr), &args, &resp); err == nil {
				t.Errorf("the leader answered a forged AppendEntries: %+v", resp)
			}
			if got := leader.Node().Status().Term; got != term {
				t.Errorf("the cluster's term moved from %d to %d", term, got)
			}
		})
	}
	d, err := c.Followers()[0].Node().Allow(context.Background(), contract.Request{Checks: []contract.Check{{Key: "still-serving", Limit: limit, Cost: 1}}})
	if err != nil || !d.Allowed {
		t.Fatalf("the cluster no longer serves: %+v, %v", d, err)
	}
	if n := len(c.WaitLeader().Node().Status().Members); n != 3 {
		t.Fatalf("%d members, want 3", n)
	}
}

func waitLeads(t *testing.T, n *cluster.Node) {
	t.Helper()
	testenv.WaitFor(t, "the stranger to lead its own cluster", n.IsLeader)
}
