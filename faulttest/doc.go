// Package faulttest proves limitnode under faults: linearizability checked
// with porcupine while a nemesis kills, restarts, partitions and heals
// nodes; clocks skewed on the leader; ambiguous outcomes retried with
// request IDs; invariants checked after every run. It holds tests only.
//
// The short runs are part of go test ./...; the long run is
//
//	go test ./faulttest -run Linearizable -v -faulttest.long
//
// (several minutes, many seeds); see docs/guarantees.md.
package faulttest
