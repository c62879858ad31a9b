package transport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// An HTTP client sent to the Raft port by mistake (-join or -addr given a
// node's -raft address) would see its connection closed under it: a
// "connection reset by peer" that names neither the port nor the fix. Its
// first bytes give it away: a request line, "POST /v1/cluster/join
// HTTP/1.1", where a node's dialer sends one protocol byte that is no
// method's first letter. The mux answers such a request in HTTP, 421
// Misdirected Request with the API's JSON error body (code wrong_port), so
// that the client reports why it failed and what to give instead.

// maxRequestHead bounds what is read of a misdirected request: its request
// line and headers, or as much of them as fits.
const maxRequestHead = 16 << 10

// WrongPortCode is the code of the error body that the Raft port answers
// an HTTP request with.
const WrongPortCode = "wrong_port"

// wrongPortMessage is the error the Raft port answers an HTTP request with.
const wrongPortMessage = "this is the Raft port of a limitnode node, not its HTTP API: give the node's HTTP address (its -http); -join, -addr and the clients take HTTP addresses"

// wrongPortLog is the node's log line for an HTTP request it answered on
// the Raft port.
const wrongPortLog = "transport: answered an HTTP request on the raft port with 421: it is for the other members; HTTP clients (-join, -addr) need the -http address"

// drainTimeout bounds how long the mux reads what a misdirected client
// still sends after the answer, so that closing the connection with its
// bytes unread does not reset it before the client has read the answer.
const drainTimeout = time.Second

// isRequestLine reports whether line is an HTTP/1 request line: a method
// of capital letters, a target and the version, "POST /v1/cluster/join
// HTTP/1.1\r\n".
func isRequestLine(line []byte) bool {
	fields := bytes.Fields(line)
	return len(fields) == 3 && startsWithMethod(fields[0]) && len(fields[0]) <= maxMethodLen && bytes.HasPrefix(fields[2], []byte("HTTP/1."))
}

// maxMethodLen is the length of the longest method: OPTIONS, CONNECT.
const maxMethodLen = len("OPTIONS")

// startsWithMethod reports whether head, the first bytes of a connection,
// may begin an HTTP request: capital letters, as many as a method has,
// then (if head goes on) a space and the start of a target.
func startsWithMethod(head []byte) bool {
	method, rest, spaced := bytes.Cut(head, []byte(" "))
	if len(method) == 0 || len(method) > maxMethodLen {
		return false
	}
	for _, c := range method {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return !spaced || len(rest) == 0 || rest[0] == '/' || rest[0] == '*' || rest[0] == 'h'
}

// answerHTTP reads the request line and headers of what conn sent after
// prefix (the bytes already read of it) and, when they are an HTTP
// request's, answers it with wrongPort. The method is read a byte at a
// time, so that a connection that does not begin with one is dropped at
// once rather than waited on. It reports whether it answered; either way
// conn is closed.
func answerHTTP(conn net.Conn, prefix []byte) bool {
	_ = conn.SetDeadline(time.Now().Add(headerTimeout))
	r := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(prefix), io.LimitReader(conn, maxRequestHead)), 4096)
	var method []byte
	for {
		c, err := r.ReadByte()
		if err != nil || !startsWithMethod(append(method, c)) {
			conn.Close()
			return false
		}
		if method = append(method, c); c == ' ' {
			break
		}
	}
	line, err := r.ReadSlice('\n')
	if err != nil || !isRequestLine(append(method, line...)) {
		conn.Close()
		return false
	}
	// The headers, up to the empty line, so that none is left unread.
	for {
		l, err := r.ReadSlice('\n')
		if err != nil || len(bytes.TrimRight(l, "\r\n")) == 0 {
			break
		}
	}
	wrongPort(conn)
	return true
}

// wrongPort answers the HTTP request conn carries with a 421 whose JSON
// body says this is the Raft port, reads what the client still sends for a
// while (closing a connection with bytes unread resets it, and the client
// may lose the answer), and closes conn.
func wrongPort(conn net.Conn) {
	defer conn.Close()
	body, _ := json.Marshal(map[string]string{"error": wrongPortMessage, "code": WrongPortCode})
	body = append(body, '\n')
	_ = conn.SetWriteDeadline(time.Now().Add(headerTimeout))
	if _, err := fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		http.StatusMisdirectedRequest, http.StatusText(http.StatusMisdirectedRequest), len(body), body); err != nil {
		return
	}
	if tcp, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = tcp.CloseWrite()
	}
	_ = conn.SetReadDeadline(time.Now().Add(drainTimeout))
	_, _ = io.Copy(io.Discard, io.LimitReader(conn, maxRequestHead))
}
