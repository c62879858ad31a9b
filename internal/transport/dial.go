package transport

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// Protocol is the byte a dialer sends first on a connection, naming the
// protocol that follows.
type Protocol byte

// DialFunc opens a TCP connection to another node's Raft address.
type DialFunc func(addr string, timeout time.Duration) (net.Conn, error)

// DialTCP is the DialFunc of a plain TCP connection.
func DialTCP(addr string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, timeout)
}

// Dialer opens connections to other nodes' Raft addresses: with Dial (nil:
// DialTCP), then in mutual TLS when TLS is set, then announcing the
// protocol and exchanging hellos as a node of Cluster (hello.go).
type Dialer struct {
	Dial    DialFunc
	TLS     *TLS
	Cluster Identity
}

// Open opens a connection to a node's Raft address for protocol. A node of
// another cluster is a *ForeignClusterError, after which nothing of the
// protocol was sent.
func (d Dialer) Open(addr string, protocol Protocol, timeout time.Duration) (net.Conn, error) {
	dial := d.Dial
	if dial == nil {
		dial = DialTCP
	}
	conn, err := dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	if d.TLS != nil {
		tc := tls.Client(conn, d.TLS.clientConfig(addr))
		if err := handshake(tc, timeout); err != nil {
			conn.Close() // closed already, unless the peer answered without TLS
			return nil, err
		}
		conn = tc
	}
	local := d.Cluster.get()
	_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(append([]byte{byte(protocol)}, helloOf(local)...)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("announce protocol to %s: %w", addr, err)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	if err := sayHello(conn, addr, local, timeout); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}
