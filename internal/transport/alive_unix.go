//go:build unix

package transport

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether an idle connection's peer has closed it (or
// sent bytes nobody asked for), by peeking without blocking: a node that
// restarted left FIN or RST on every connection to its old process. It
// answers false when it cannot tell (conn offers no file descriptor).
func peerClosed(conn net.Conn) bool {
	if tc, ok := conn.(*tls.Conn); ok {
		// Peek at the socket under TLS: a close_notify or a FIN shows as
		// bytes or EOF there; an idle TLS connection has nothing pending.
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var buf [1]byte
	if err := raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: nothing to read, the connection is as it was left. n == 0
		// with no error is an orderly close; data or any other error means
		// the connection cannot carry a request/response pair any more.
		closed = !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EWOULDBLOCK)
		return true
	}); err != nil {
		return true
	}
	return closed
}
