package rls

import "github.com/hashicorp/go-msgpack/v2/codec"

// The replicated state encodes a rate_limit positionally (msgpack arrays,
// field by field), so a field added at the end changes the bytes of every
// domain, and a node of the release before it refuses them. A rate_limit
// without local_shares is therefore written as that release wrote it:
// log entries, snapshots and state digests stay the same bytes across an
// upgrade (members of two releases compare digests), and a node of the
// earlier release only meets the longer form once a domain uses
// local_shares, which needs every node upgraded first.

// rateLimitBeforeShares is RateLimit's layout before LocalShares.
type rateLimitBeforeShares struct {
	Unit            string
	RequestsPerUnit uint32
	Unlimited       bool
	Name            string
	Replaces        []Replace
	Algorithm       string
	Burst           *uint32
	Penalty         *Penalty
}

// rateLimitFields is RateLimit without its encoding methods.
type rateLimitFields RateLimit

// CodecEncodeSelf writes r in the earlier layout when it has no
// LocalShares, else with every field.
func (r *RateLimit) CodecEncodeSelf(e *codec.Encoder) {
	if r.LocalShares != nil {
		e.MustEncode((*rateLimitFields)(r))
		return
	}
	e.MustEncode(&rateLimitBeforeShares{Unit: r.Unit, RequestsPerUnit: r.RequestsPerUnit, Unlimited: r.Unlimited, Name: r.Name,
		Replaces: r.Replaces, Algorithm: r.Algorithm, Burst: r.Burst, Penalty: r.Penalty})
}

// CodecDecodeSelf reads either layout into a zero RateLimit: the earlier
// layout leaves LocalShares nil, whatever r held.
func (r *RateLimit) CodecDecodeSelf(d *codec.Decoder) {
	*r = RateLimit{}
	d.MustDecode((*rateLimitFields)(r))
}
