// Package clientip finds the address of the client behind a request: the
// peer that connected, unless that peer is a proxy the operator trusts, in
// which case the X-Forwarded-For entries are believed from the right for as
// long as each hop is itself trusted. It is the one rule for every place
// limitnode keys a limit by client address.
package clientip

import (
	"fmt"
	"net/netip"
	"strings"
)

// Resolve returns the client address behind peer (host:port), given the
// X-Forwarded-For lines that came with the call. With no trusted prefixes
// it is the peer's address, whatever the lines say: X-Forwarded-For is
// whatever the client wrote. When the peer is within a trusted prefix, the
// entries (all the lines', in order; empty ones ignored, as HTTP's list
// syntax asks) are walked from the right: each entry is the client of the
// hop after it, and the walk stops at the first address that is not
// trusted, which is the answer. An entry the walk reaches that is not an
// address is an error: a trusted proxy passed on a client it could not
// name, and neither its own address (one key for every client behind it)
// nor an entry further left (which the client may have written) would be
// the client's. IPv4-mapped IPv6 addresses count as IPv4, and a zone
// ("%eth0") is dropped: it names an interface of a host on the way, not
// the client.
func Resolve(peer string, forwardedFor []string, trusted []netip.Prefix) (netip.Addr, error) {
	ap, err := netip.ParseAddrPort(peer)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("clientip: peer address %q: %w", peer, err)
	}
	addr := plain(ap.Addr())
	if !within(addr, trusted) {
		return addr, nil
	}
	var hops []string
	for _, line := range forwardedFor {
		for hop := range strings.SplitSeq(line, ",") {
			if hop = strings.TrimSpace(hop); hop != "" {
				hops = append(hops, hop)
			}
		}
	}
	for i := len(hops) - 1; i >= 0 && within(addr, trusted); i-- {
		hop, ok := parseHop(hops[i])
		if !ok {
			return netip.Addr{}, fmt.Errorf("clientip: the X-Forwarded-For entry %q that the trusted proxy %s passed on is not an address, so the client is unknown", hops[i], addr)
		}
		addr = hop
	}
	return addr, nil
}

// parseHop reads one X-Forwarded-For entry: an address, with or without a
// port ("203.0.113.7", "203.0.113.7:4711", "[2001:db8::1]:4711").
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return plain(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return plain(ap.Addr()), true
	}
	return netip.Addr{}, false
}

// plain is a without a zone, an IPv4-mapped address as IPv4.
func plain(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// Group is the address a per-client cap counts a with: an IPv4 address (or
// an IPv4-mapped one) itself, an IPv6 address its /64, the smallest block a
// host is usually given, so that one host cannot take a cap once per
// address it holds. A zone is dropped.
func Group(a netip.Addr) netip.Addr {
	a = plain(a)
	if a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().Addr()
	}
	return a
}

func within(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParsePrefixes reads addresses and CIDR prefixes ("10.0.0.0/8",
// "127.0.0.1", "::1"); an address is a prefix of its full length.
func ParsePrefixes(list ...string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("clientip: %q is neither an address nor a CIDR prefix", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}
