package testcluster

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/limitnode/limitnode/cluster"
)

// ErrLinkCut is what a node sees when it dials over, or uses a connection
// on, a link the test has cut.
var ErrLinkCut = errors.New("testcluster: link cut")

type link struct{ from, to string }

// Network sits between the nodes of a test cluster: every connection one
// node opens to another's Raft address (Raft's RPCs and forwarded requests
// alike) goes through it, so a test can cut or slow each direction of each
// link. Clients' HTTP connections to the nodes are not affected.
type Network struct {
	mu    sync.Mutex
	cut   map[link]bool
	delay map[link]time.Duration
	ids   map[string]string // Raft address → node ID
	conns map[*faultConn]struct{}
}

func newNetwork() *Network {
	return &Network{cut: map[link]bool{}, delay: map[link]time.Duration{}, ids: map[string]string{}, conns: map[*faultConn]struct{}{}}
}

func (nw *Network) register(id, raftAddr string) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.ids[raftAddr] = id
}

// dialer returns the cluster.DialFunc of the node named from.
func (nw *Network) dialer(from string) cluster.DialFunc {
	return func(addr string, timeout time.Duration) (net.Conn, error) {
		nw.mu.Lock()
		to := nw.ids[addr]
		cut := nw.cut[link{from, to}]
		nw.mu.Unlock()
		if cut {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ErrLinkCut}
		}
		conn, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return nil, err
		}
		fc := &faultConn{Conn: conn, out: link{from, to}, nw: nw}
		nw.mu.Lock()
		nw.conns[fc] = struct{}{}
		nw.mu.Unlock()
		return fc, nil
	}
}

// Cut drops everything node from sends to node to, until Heal. Connections
// already open across the link are closed.
func (nw *Network) Cut(from, to string) {
	nw.mu.Lock()
	nw.cut[link{from, to}] = true
	var doomed []*faultConn
	for c := range nw.conns {
		if c.out == (link{from, to}) || c.out == (link{to, from}) {
			doomed = append(doomed, c)
		}
	}
	nw.mu.Unlock()
	for _, c := range doomed {
		c.Close()
	}
}

// Partition cuts every link between the two groups, both ways.
func (nw *Network) Partition(a, b []string) {
	for _, x := range a {
		for _, y := range b {
			nw.Cut(x, y)
			nw.Cut(y, x)
		}
	}
}

// Heal restores what Cut took from the link from → to.
func (nw *Network) Heal(from, to string) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	delete(nw.cut, link{from, to})
}

// HealAll restores every link and removes every delay.
func (nw *Network) HealAll() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.cut = map[link]bool{}
	nw.delay = map[link]time.Duration{}
}

// Delay holds every write from node from to node to for d (0 removes it).
func (nw *Network) Delay(from, to string, d time.Duration) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if d <= 0 {
		delete(nw.delay, link{from, to})
		return
	}
	nw.delay[link{from, to}] = d
}

func (nw *Network) state(l link) (bool, time.Duration) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.cut[l], nw.delay[l]
}

// faultConn is a connection opened by out.from to out.to; writes travel
// out, reads travel back.
type faultConn struct {
	net.Conn
	out       link
	nw        *Network
	closeOnce sync.Once
}

func (c *faultConn) Write(p []byte) (int, error) {
	cut, delay := c.nw.state(c.out)
	if delay > 0 {
		time.Sleep(delay)
		cut, _ = c.nw.state(c.out)
	}
	if cut {
		c.Close()
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: ErrLinkCut}
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if cut, _ := c.nw.state(link{c.out.to, c.out.from}); cut {
		c.Close()
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: ErrLinkCut}
	}
	return n, err
}

func (c *faultConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.nw.mu.Lock()
		delete(c.nw.conns, c)
		c.nw.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

// SyscallConn exposes the socket underneath, so a node can peek at its idle
// pooled connections as it does without the test network.
func (c *faultConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}
