package fsm

import "github.com/hashicorp/go-msgpack/v2/codec"

// A return of a policy's or an inline limit's share is written as the
// release before RLS shares wrote it (see rls.RateLimit's CodecEncodeSelf
// for why): a node of that release applies it during an upgrade. Only a
// return of an RLS descriptor's share, which needs every node upgraded to
// be granted at all, carries the RLS field.

// returnShareBeforeRLS is ReturnShareCommand's layout before RLS.
type returnShareBeforeRLS struct {
	NowNanos   int64
	Check      Check
	ShareID    uint64
	Unspent    int64
	Holder     string
	Proof      []byte
	Background bool
}

// returnShareFields is ReturnShareCommand without its encoding methods.
type returnShareFields ReturnShareCommand

// CodecEncodeSelf writes c in the earlier layout when it names no RLS
// query, else with every field.
func (c *ReturnShareCommand) CodecEncodeSelf(e *codec.Encoder) {
	if c.RLS != nil {
		e.MustEncode((*returnShareFields)(c))
		return
	}
	e.MustEncode(&returnShareBeforeRLS{NowNanos: c.NowNanos, Check: c.Check, ShareID: c.ShareID, Unspent: c.Unspent,
		Holder: c.Holder, Proof: c.Proof, Background: c.Background})
}

// CodecDecodeSelf reads either layout into a zero command: the earlier
// layout leaves RLS nil, whatever c held.
func (c *ReturnShareCommand) CodecDecodeSelf(d *codec.Decoder) {
	*c = ReturnShareCommand{}
	d.MustDecode((*returnShareFields)(c))
}
