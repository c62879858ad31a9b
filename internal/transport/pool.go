package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrNotSent marks a failure before any byte of a message left this node:
// the receiver cannot have acted on it, so the message may be sent again.
var ErrNotSent = errors.New("transport: message not sent")

// maxIdleConns bounds the idle connections a pool keeps to one address: a
// follower keeps several forwards under way in each of its two forwarding
// batchers (cluster.Config.MaxForwardsInFlight), each on a connection of its
// own, and one dialled afresh for each would cost a handshake per forward.
const maxIdleConns = 16

// defaultTimeout bounds an exchange whose context has no deadline.
const defaultTimeout = 5 * time.Second

// Pool sends request/response pairs of one protocol to other nodes over
// pooled connections.
type Pool struct {
	dialer      Dialer
	protocol    Protocol
	dialTimeout time.Duration
	mu          sync.Mutex
	idle        map[string][]*Conn
}

// NewPool returns a pool of protocol's connections opened with d, each
// dial bounded by dialTimeout.
func NewPool(d Dialer, protocol Protocol, dialTimeout time.Duration) *Pool {
	return &Pool{dialer: d, protocol: protocol, dialTimeout: dialTimeout, idle: make(map[string][]*Conn)}
}

// get returns a pooled connection to addr, or a new one. A pooled
// connection whose peer has closed it (the node restarted, or timed it out)
// is dropped first: sending on it would leave the outcome unknown, since a
// failure after the write cannot tell "never read" from "acted, then died".
func (p *Pool) get(addr string) (*Conn, error) {
	for {
		p.mu.Lock()
		conns := p.idle[addr]
		if len(conns) == 0 {
			p.mu.Unlock()
			break
		}
		c := conns[len(conns)-1]
		p.idle[addr] = conns[:len(conns)-1]
		p.mu.Unlock()
		if !peerClosed(c.conn) {
			return c, nil
		}
		c.conn.Close()
	}
	conn, err := p.dialer.Open(addr, p.protocol, p.dialTimeout)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return NewConn(conn), nil
}

func (p *Pool) put(addr string, c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle[addr]) >= maxIdleConns {
		c.conn.Close()
		return
	}
	p.idle[addr] = append(p.idle[addr], c)
}

// DropExcept closes pooled connections to every address but keep: after a
// change of leader they lead to a follower, or to a node that restarted.
func (p *Pool) DropExcept(keep string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, conns := range p.idle {
		if addr == keep {
			continue
		}
		for _, c := range conns {
			c.conn.Close()
		}
		delete(p.idle, addr)
	}
}

// Close closes every pooled connection.
func (p *Pool) Close() { p.DropExcept("") }

// Exchange sends req to addr and reads the reply into resp, by ctx's
// deadline. An error wrapping ErrNotSent means the receiver cannot have
// acted; any other error leaves the outcome unknown.
func (p *Pool) Exchange(ctx context.Context, addr string, req, resp any) error {
	c, err := p.get(addr)
	if err != nil {
		return err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(defaultTimeout)
	}
	_ = c.conn.SetDeadline(deadline)
	if err := c.Write(req); err != nil {
		c.conn.Close()
		return fmt.Errorf("send to %s: %w", addr, err)
	}
	if err := c.Read(resp); err != nil {
		c.conn.Close()
		return fmt.Errorf("read the answer of %s: %w", addr, err)
	}
	_ = c.conn.SetDeadline(time.Time{})
	p.put(addr, c)
	return nil
}
