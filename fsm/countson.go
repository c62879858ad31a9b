package fsm

import (
	"strconv"
	"strings"
)

// CountsOn names what r counts on: its checks' policies, keys, inline
// limits and dimensions, or its query's domain and descriptors. Two
// requests with the same name are decided on the same state; a node keys
// its queued requests, its shares and its deny leases by it.
func (r *Request) CountsOn() string {
	var b strings.Builder
	if q := r.RLS; q != nil {
		b.WriteString("rls\x00" + q.Domain)
		for _, d := range q.Descriptors {
			for _, e := range d.Entries {
				b.WriteString("\x00" + e.Key + "=" + e.Value)
			}
			b.WriteString("\x01")
		}
		return b.String()
	}
	for i := range r.Checks {
		b.WriteString(r.Checks[i].CountsOn())
		b.WriteString("\x01")
	}
	return b.String()
}

// CountsOn names what c counts on: its policy, key, inline limit and
// dimensions.
func (c *Check) CountsOn() string {
	var b strings.Builder
	b.WriteString(c.Policy + "\x00" + c.Key + "\x00" + strconv.FormatInt(c.Rate, 10) + "/" + strconv.FormatInt(c.Period, 10) +
		"/" + strconv.FormatInt(c.Burst, 10) + "/" + c.Algorithm.String())
	for _, d := range c.Dimensions {
		b.WriteString("\x00" + d.Name + "=" + d.Value)
	}
	return b.String()
}
