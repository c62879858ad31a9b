package groupcommit

import "github.com/limitnode/limitnode/fsm"

// Load is what requests weigh for a flush: how many there are, how many
// checks they hold (what applying them costs), and about how many bytes
// they encode to (what the entry or the forwarded message costs).
type Load struct {
	Requests, Checks, Bytes int
}

// Plus is the load of both.
func (l Load) Plus(o Load) Load {
	return Load{l.Requests + o.Requests, l.Checks + o.Checks, l.Bytes + o.Bytes}
}

// Within reports whether l is at most limit in every measure.
func (l Load) Within(limit Load) bool {
	return l.Requests <= limit.Requests && l.Checks <= limit.Checks && l.Bytes <= limit.Bytes
}

// Per-field allowances of loadOf's estimate: msgpack spends at most 9 bytes
// on an integer and 5 on a string's length.
const (
	requestOverhead   = 16
	checkOverhead     = 6 * 9
	stringOverhead    = 5
	dimensionOverhead = 2 * stringOverhead
)

// LoadOf weighs requests. The byte count is an upper bound of their msgpack
// encoding, so a flush under the limit encodes under it.
func LoadOf(reqs []fsm.Request) Load {
	l := Load{Requests: len(reqs)}
	for i := range reqs {
		r := &reqs[i]
		l.Bytes += requestOverhead + stringOverhead + len(r.RequestID)
		l.Checks += len(r.Checks)
		for j := range r.Checks {
			c := &r.Checks[j]
			l.Bytes += checkOverhead + 2*stringOverhead + len(c.Key) + len(c.Policy)
			for _, d := range c.Dimensions {
				l.Bytes += dimensionOverhead + len(d.Name) + len(d.Value)
			}
		}
		if q := r.RLS; q != nil {
			l.Checks += len(q.Descriptors)
			l.Bytes += stringOverhead + len(q.Domain)
			for _, d := range q.Descriptors {
				l.Bytes += checkOverhead + stringOverhead
				for _, e := range d.Entries {
					l.Bytes += dimensionOverhead + len(e.Key) + len(e.Value)
				}
			}
		}
	}
	return l
}
