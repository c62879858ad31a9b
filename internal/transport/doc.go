// Package transport carries limitnode's traffic between nodes over each
// node's one Raft address: a listener that tells protocols apart by the
// first byte a dialer sends (mux.go), the dialer that sends it (dial.go),
// a hello after it by which nodes of different clusters refuse each other
// (hello.go), refusals logged once per peer and interval (throttle.go),
// mutual TLS on every connection in both directions (tls.go), length-framed
// msgpack messages (frame.go), and a pool of connections that never sends a
// message on one its peer has closed (pool.go).
//
// It knows nothing of Raft or of the messages' meaning: package cluster
// runs Raft's RPCs and its own forwarding protocol over it.
package transport
