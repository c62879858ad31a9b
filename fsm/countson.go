package fsm

import (
	"strconv"
	"strings"

	"github.com/limitnode/limitnode/rls"
)

// CountsOn names what r counts on: its checks' policies, keys, inline
// limits and dimensions, or its query's domain and descriptors. Two
// requests with the same name are decided on the same state; a node keys
// its queued requests, its shares and its deny leases by it. Every string
// in a name is written with its length first, so that no key, value or
// dimension, whatever bytes it holds, makes two requests that count on
// different state read the same.
func (r *Request) CountsOn() string {
	var b strings.Builder
	if q := r.RLS; q != nil {
		for i := range q.Descriptors {
			b.WriteString(DescriptorCountsOn(q.Domain, &q.Descriptors[i]))
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

// DescriptorCountsOn names what descriptor d of a query of domain counts
// on: the domain and d's entries.
func DescriptorCountsOn(domain string, d *rls.QueryDescriptor) string {
	var b strings.Builder
	b.WriteString("rls\x00")
	writeCounted(&b, domain)
	for _, e := range d.Entries {
		writeCounted(&b, e.Key)
		writeCounted(&b, e.Value)
	}
	return b.String()
}

// CountsOn names what c counts on: its policy, key, inline limit and
// dimensions.
func (c *Check) CountsOn() string {
	var b strings.Builder
	writeCounted(&b, c.Policy)
	writeCounted(&b, c.Key)
	b.WriteString(strconv.FormatInt(c.Rate, 10) + "/" + strconv.FormatInt(c.Period, 10) +
		"/" + strconv.FormatInt(c.Burst, 10) + "/" + c.Algorithm.String())
	for _, d := range c.Dimensions {
		b.WriteString("\x00")
		writeCounted(&b, d.Name)
		writeCounted(&b, d.Value)
	}
	return b.String()
}

// writeCounted writes s to b after its length and a colon.
func writeCounted(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}
