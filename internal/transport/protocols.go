package transport

// The Raft address carries two protocols, told apart by the first byte a
// dialer sends (Mux): Raft's own RPCs, and limitnode's forwarding of
// requests from followers to the leader. One listening address per node
// keeps the operator's configuration to the two addresses of the contract.
const (
	ProtocolRaft    Protocol = 'R'
	ProtocolForward Protocol = 'F'
)
