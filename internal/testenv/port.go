package testenv

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// A Port is a 127.0.0.1 port a test holds from HoldPort to its end: it
// listens on it from the start, on a port the OS picked, and lends that
// listener to one server at a time. A node restarted in the test's process
// comes back on its port (where the other members, which remember its Raft
// address, and the test's clients look for it) without the port ever being
// released in between: no other process can take it, and nothing but the
// test's own servers can answer on it.
//
// While no server has the port, a connection to it is reset at once, as a
// port nothing listens on answers.
type Port struct {
	ln   net.Listener
	mu   sync.Mutex
	lent *lentListener // nil while no server has the port
}

// HoldPort listens on 127.0.0.1:0 for the rest of the test.
func HoldPort(t TB) *Port {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: hold a port: %v", err)
	}
	p := &Port{ln: ln}
	go p.dispatch()
	t.Cleanup(p.close)
	return p
}

// Addr returns the port's address, host:port.
func (p *Port) Addr() string { return p.ln.Addr().String() }

// Listener lends the port to a server: the listener accepts the port's
// connections until it is closed, which gives the port back. The port is
// lent to one listener at a time.
func (p *Port) Listener() (net.Listener, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lent != nil {
		return nil, fmt.Errorf("testenv: port %s is lent already: close its listener first", p.Addr())
	}
	p.lent = &lentListener{port: p, conns: make(chan net.Conn), closed: make(chan struct{})}
	return p.lent, nil
}

// dispatch accepts the port's connections for as long as it is held, and
// hands each to the listener that has the port, or resets it.
func (p *Port) dispatch() {
	for {
		conn, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // out of descriptors, say: the connection waits
			time.Sleep(5 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		lent := p.lent
		p.mu.Unlock()
		if lent == nil || !lent.deliver(conn) {
			reset(conn)
		}
	}
}

// close releases the port at the end of the test, and closes the listener
// it is lent to.
func (p *Port) close() {
	p.ln.Close()
	p.mu.Lock()
	lent := p.lent
	p.mu.Unlock()
	if lent != nil {
		lent.Close()
	}
}

// reset closes conn with a TCP reset, as a port nobody listens on answers.
func reset(conn net.Conn) {
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	conn.Close()
}

// lentListener is a Port lent to one server.
type lentListener struct {
	port      *Port
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

// deliver hands conn to the server, unless the listener closes first.
func (l *lentListener) deliver(conn net.Conn) bool {
	select {
	case l.conns <- conn:
		return true
	case <-l.closed:
		return false
	}
}

func (l *lentListener) Accept() (net.Conn, error) {
	select {
	case conn := <-l.conns:
		return conn, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: net.ErrClosed}
	}
}

// Close gives the port back: connections are reset until it is lent again.
func (l *lentListener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		l.port.mu.Lock()
		if l.port.lent == l {
			l.port.lent = nil
		}
		l.port.mu.Unlock()
	})
	return nil
}

func (l *lentListener) Addr() net.Addr { return l.port.ln.Addr() }
