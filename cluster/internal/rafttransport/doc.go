// Package rafttransport is the Raft side of a node's Raft port: the stream
// layer hashicorp/raft dials and accepts on, over internal/transport's mux,
// and the gate a stopping node closes on heartbeats. It keeps Raft's types
// inside cluster/, and internal/transport free of them.
package rafttransport
