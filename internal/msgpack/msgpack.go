// Package msgpack holds the one msgpack configuration of limitnode's wire
// formats: the Raft log's commands and snapshots (package fsm) and the
// forwarding protocol between nodes (package cluster), whose messages carry
// the log's types. One handle keeps the two encodings the same.
package msgpack

import "github.com/hashicorp/go-msgpack/v2/codec"

// Handle is the msgpack handle of every wire format: structs encode as
// arrays (fields by position, not name: smaller and faster), an unknown
// field is an error, and a length prefix may not make the decoder allocate
// more than a few kilobytes up front, so a corrupt or hostile length cannot
// cost gigabytes before the data runs out.
var Handle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.MaxInitLen = 4096
	h.ErrorIfNoField = true
	h.WriteExt = true
	h.StructToArray = true
	return h
}()
