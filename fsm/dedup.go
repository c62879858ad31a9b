package fsm

import (
	"encoding/binary"
	"fmt"
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

// The memory of request IDs belongs to its callers: each named scope (an
// API token) holds at most the leader's bound of IDs (AllowCommand's
// MaxIDsPerCaller), and the whole state at most MaxDedupEntries (without
// tokens, every caller is the one unnamed scope, bound by the state's). A new ID
// past either bound is refused; no ID is ever forgotten before its
// DedupWindow to make room, so a flood of one caller's IDs never turns
// another caller's retry into a second charge.

// refuseNewID returns the refusal of a new request ID of scope when its
// scope holds bound IDs (the leader's bound per caller), or the state all
// it may; nil when it fits.
func (f *FSM) refuseNewID(scope string, bound int64) *contract.Error {
	if f.dedupPerScope.full(scope, bound) {
		return &contract.Error{Code: contract.CodeResourceExhausted, Field: "request_id", Message: fmt.Sprintf(
			"this caller holds %d request IDs, the most one caller may: each is remembered for %s; send requests without request_id, or again later", bound, DedupWindow)}
	}
	if len(f.dedup) >= MaxDedupEntries {
		return &contract.Error{Code: contract.CodeResourceExhausted, Field: "request_id", Message: fmt.Sprintf(
			"the cluster remembers its maximum of %d request IDs, each for %s; send requests without request_id, or again later", MaxDedupEntries, DedupWindow)}
	}
	return nil
}

func (f *FSM) remember(e *dedupEntry) {
	f.dedup[e.key] = e
	f.dedupQueue = append(f.dedupQueue, e)
	f.dedupPerScope.add(e.scope())
}

// scope is whose the remembered ID is.
func (e *dedupEntry) scope() string {
	scope, _ := splitDedupKey(e.key)
	return scope
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
	f.dedupPerScope.remove(e.scope())
	// Compact once the dead prefix is the larger half, so the queue's
	// memory follows the live IDs.
	if f.dedupHead > len(f.dedupQueue)/2 {
		f.dedupQueue = append([]*dedupEntry(nil), f.dedupQueue[f.dedupHead:]...)
		f.dedupHead = 0
	}
}
