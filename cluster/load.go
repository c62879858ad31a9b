package cluster

import "github.com/limitnode/limitnode/fsm"

// load is what requests weigh for a flush: how many there are, how many
// checks they hold (what applying them costs), and about how many bytes
// they encode to (what the entry or the forwarded message costs).
type load struct {
	requests, checks, bytes int
}

func (l load) plus(o load) load {
	return load{l.requests + o.requests, l.checks + o.checks, l.bytes + o.bytes}
}

func (l load) within(limit load) bool {
	return l.requests <= limit.requests && l.checks <= limit.checks && l.bytes <= limit.bytes
}

// Per-field allowances of loadOf's estimate: msgpack spends at most 9 bytes
// on an integer and 5 on a string's length.
const (
	requestOverhead   = 16
	checkOverhead     = 6 * 9
	stringOverhead    = 5
	dimensionOverhead = 2 * stringOverhead
)

// loadOf weighs requests. The byte count is an upper bound of their msgpack
// encoding, so a flush under the limit encodes under it.
func loadOf(reqs []fsm.Request) load {
	l := load{requests: len(reqs)}
	for i := range reqs {
		r := &reqs[i]
		l.bytes += requestOverhead + stringOverhead + len(r.RequestID)
		l.checks += len(r.Checks)
		for j := range r.Checks {
			c := &r.Checks[j]
			l.bytes += checkOverhead + 2*stringOverhead + len(c.Key) + len(c.Policy)
			for _, d := range c.Dimensions {
				l.bytes += dimensionOverhead + len(d.Name) + len(d.Value)
			}
		}
		if q := r.RLS; q != nil {
			l.checks += len(q.Descriptors)
			l.bytes += stringOverhead + len(q.Domain)
			for _, d := range q.Descriptors {
				l.bytes += checkOverhead + stringOverhead
				for _, e := range d.Entries {
					l.bytes += dimensionOverhead + len(e.Key) + len(e.Value)
				}
			}
		}
	}
	return l
}
