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
			writeDescriptor(&b, q.Domain, &q.Descriptors[i])
			b.WriteByte('\x01')
		}
		return b.String()
	}
	for i := range r.Checks {
		r.Checks[i].write(&b)
		b.WriteByte('\x01')
	}
	return b.String()
}

// DescriptorCountsOn names what descriptor d of a query of domain counts
// on: the domain and d's entries.
func DescriptorCountsOn(domain string, d *rls.QueryDescriptor) string {
	var b strings.Builder
	writeDescriptor(&b, domain, d)
	return b.String()
}

func writeDescriptor(b *strings.Builder, domain string, d *rls.QueryDescriptor) {
	b.WriteString("rls\x00")
	writeCounted(b, domain)
	for _, e := range d.Entries {
		writeCounted(b, e.Key)
		writeCounted(b, e.Value)
	}
}

// CountsOn names what c counts on: its policy, key, inline limit and
// dimensions.
func (c *Check) CountsOn() string {
	var b strings.Builder
	c.write(&b)
	return b.String()
}

func (c *Check) write(b *strings.Builder) {
	var digits [20]byte
	writeCounted(b, c.Policy)
	writeCounted(b, c.Key)
	for _, n := range [...]int64{c.Rate, c.Period, c.Burst} {
		b.Write(strconv.AppendInt(digits[:0], n, 10))
		b.WriteByte('/')
	}
	b.WriteString(c.Algorithm.String())
	for _, d := range c.Dimensions {
		b.WriteByte('\x00')
		writeCounted(b, d.Name)
		writeCounted(b, d.Value)
	}
}

// writeCounted writes s to b after its length and a colon.
func writeCounted(b *strings.Builder, s string) {
	var digits [20]byte
	b.Write(strconv.AppendInt(digits[:0], int64(len(s)), 10))
	b.WriteByte(':')
	b.WriteString(s)
}
