package fsm

import (
	"encoding/binary"
	"hash/fnv"

	"github.com/limitnode/limitnode/contract"
)

// A request ID is remembered with a fingerprint of its request, so that the
// same ID on a different request (another key, cost or limit: a caller's
// bug, or someone using IDs another caller will send) is refused rather than
// answered with the first decision, and within its scope, so that callers of
// different scopes never share IDs.

// dedupEntry is a remembered request ID and its first result.
type dedupEntry struct {
	key         string // scope, a NUL, then the ID: the map key
	atNano      int64
	result      Result
	fingerprint uint64 // 0: unknown (remembered before fingerprints were)
}

// dedupKey is the map key of an ID within its scope.
func dedupKey(scope, id string) string {
	if scope == "" {
		return id
	}
	return scope + "\x00" + id
}

// splitDedupKey undoes dedupKey.
func splitDedupKey(key string) (scope, id string) {
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// fingerprint is an FNV-1a hash of what a request asks: every field of every
// check, in order. It is deterministic, so every replica remembers the same.
func fingerprint(r *Request) uint64 {
	h := fnv.New64a()
	var buf []byte
	str := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	num := func(v int64) { buf = binary.AppendVarint(buf, v) }
	if r.MaxWait != 0 {
		num(r.MaxWait)
	}
	for i := range r.Checks {
		c := &r.Checks[i]
		str(c.Key)
		str(c.Policy)
		num(int64(c.Algorithm))
		num(c.Rate)
		num(c.Period)
		num(c.Burst)
		num(c.Cost)
		num(int64(len(c.Dimensions)))
		for _, d := range c.Dimensions {
			str(d.Name)
			str(d.Value)
		}
	}
	_, _ = h.Write(buf) // a hash never fails to write
	if sum := h.Sum64(); sum != 0 {
		return sum
	}
	return 1 // 0 means unknown
}

// seen answers a request whose ID is remembered: the first result marked as
// a duplicate, or a conflict when the request differs from the first.
func (e *dedupEntry) answer(r *Request) Result {
	if e.fingerprint != 0 && e.fingerprint != fingerprint(r) {
		return Result{Rejection: &contract.Error{Code: contract.CodeConflict, Field: "request_id",
			Message: "request_id " + quote(r.RequestID) + " was used by a different request (another key, limit, policy or cost); use a new ID for a new request"}}
	}
	res := e.result
	res.Duplicate = true
	return res
}

func quote(s string) string { return "\"" + s + "\"" }

func (f *FSM) remember(e *dedupEntry) {
	if len(f.dedup) >= MaxDedupEntries {
		f.forgetOldestID()
	}
	f.dedup[e.key] = e
	f.dedupQueue = append(f.dedupQueue, e)
}

func (f *FSM) expireDedup(now int64) {
	for f.dedupHead < len(f.dedupQueue) && f.dedupQueue[f.dedupHead].atNano+int64(DedupWindow) <= now {
		f.forgetOldestID()
	}
}

func (f *FSM) forgetOldestID() {
	e := f.dedupQueue[f.dedupHead]
	f.dedupQueue[f.dedupHead] = nil
	f.dedupHead++
	delete(f.dedup, e.key)
	// Compact once the dead prefix is the larger half, so the queue's
	// memory follows the live IDs.
	if f.dedupHead > len(f.dedupQueue)/2 {
		f.dedupQueue = append([]*dedupEntry(nil), f.dedupQueue[f.dedupHead:]...)
		f.dedupHead = 0
	}
}
