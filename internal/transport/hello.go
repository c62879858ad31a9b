package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Every connection begins with a hello in each direction, after the
// protocol byte: the dialer names the cluster it belongs to, the listener
// answers with its own and whether it accepts. Two nodes that both know
// their cluster's ID and name different ones refuse each other, whichever
// dialed: a node started on another cluster's data directory cannot take
// part in this cluster's elections, replication or forwarding. A node that
// knows no ID yet (one being joined, whose state has not arrived) is
// accepted, and accepts.
//
//	dialer:   version (1 byte, helloVersion), length (1 byte), cluster ID
//	listener: version, verdict (1 byte: 0 accepted, 1 refused), length, cluster ID
//
// A node of an earlier build sends no hello: its first bytes are a Raft RPC
// or a frame, which do not read as one, so it is refused too. The cluster's
// members therefore run one build's protocol; see package cluster's
// forward.go for how they are upgraded.

// helloVersion is the first byte of a hello.
const helloVersion = 1

// maxHelloID bounds the ID a hello carries (contract.MaxClusterIDBytes).
const maxHelloID = 64

// Identity returns the ID of the cluster a node belongs to, or "" while it
// knows none.
type Identity func() string

// ErrForeignCluster marks a connection refused because the two nodes belong
// to different clusters.
var ErrForeignCluster = errors.New("the nodes belong to different clusters")

// ForeignClusterError is a connection refused because the node at Addr
// belongs to cluster Remote and this one to Local.
type ForeignClusterError struct {
	Addr, Local, Remote string
}

func (e *ForeignClusterError) Error() string {
	return fmt.Sprintf("the node at %s belongs to cluster %s, this node to cluster %s: they refuse each other (a data directory of another cluster?)", e.Addr, e.Remote, e.Local)
}

// Is makes errors.Is(err, ErrForeignCluster) hold.
func (e *ForeignClusterError) Is(target error) bool { return target == ErrForeignCluster }

// sameCluster reports whether two nodes naming these IDs may talk.
func sameCluster(a, b string) bool { return a == "" || b == "" || a == b }

func (id Identity) get() string {
	if id == nil {
		return ""
	}
	s := id()
	if len(s) > maxHelloID {
		s = s[:maxHelloID]
	}
	return s
}

// sayHello is the dialer's side, after the protocol byte was sent with it:
// it reads the listener's answer and returns an error unless both accept.
func sayHello(conn net.Conn, addr, local string, timeout time.Duration) error {
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	defer conn.SetReadDeadline(time.Time{})
	var head [3]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return fmt.Errorf("read the hello of %s (a node of another build?): %w", addr, err)
	}
	if head[0] != helloVersion {
		return fmt.Errorf("%s answered a hello of version %d; this node speaks version %d (a node of another build?)", addr, head[0], helloVersion)
	}
	remote := make([]byte, head[2])
	if _, err := io.ReadFull(conn, remote); err != nil {
		return fmt.Errorf("read the hello of %s: %w", addr, err)
	}
	if head[1] != 0 || !sameCluster(local, string(remote)) {
		return &ForeignClusterError{Addr: addr, Local: local, Remote: string(remote)}
	}
	return nil
}

// helloOf encodes the dialer's hello, to follow the protocol byte.
func helloOf(local string) []byte {
	out := []byte{helloVersion, byte(len(local))}
	return append(out, local...)
}

// answerHello is the listener's side: it reads the dialer's hello, answers
// with this node's, and returns the dialer's cluster ID and whether the two
// may talk. An error means the bytes were not a hello.
func answerHello(conn net.Conn, local string) (remote string, ok bool, err error) {
	var head [2]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return "", false, fmt.Errorf("no hello: %w", err)
	}
	if head[0] != helloVersion || head[1] > maxHelloID {
		return "", false, fmt.Errorf("no hello (version byte %d): a node of another build, or not a limitnode node", head[0])
	}
	id := make([]byte, head[1])
	if _, err := io.ReadFull(conn, id); err != nil {
		return "", false, fmt.Errorf("a hello cut short: %w", err)
	}
	remote = string(id)
	ok = sameCluster(local, remote)
	verdict := byte(0)
	if !ok {
		verdict = 1
	}
	reply := append([]byte{helloVersion, verdict, byte(len(local))}, local...)
	if _, err := conn.Write(reply); err != nil {
		return remote, false, fmt.Errorf("answer the hello: %w", err)
	}
	return remote, ok, nil
}
