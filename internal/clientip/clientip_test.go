package clientip

import (
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	t.Parallel()
	proxies, err := ParsePrefixes("10.0.0.0/8", "::1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		peer    string
		xff     []string
		trusted bool
		want    string
	}{
		{"no proxies: the peer", "203.0.113.7:5000", nil, false, "203.0.113.7"},
		{"no proxies: a forged header is ignored", "203.0.113.7:5000", []string{"198.51.100.1"}, false, "203.0.113.7"},
		{"an untrusted peer's header is ignored", "203.0.113.7:5000", []string{"198.51.100.1"}, true, "203.0.113.7"},
		{"a trusted proxy passes the client on", "10.1.2.3:5000", []string{"198.51.100.1"}, true, "198.51.100.1"},
		{"the rightmost untrusted hop wins over what the client prepended", "10.1.2.3:5000", []string{"1.1.1.1, 198.51.100.1"}, true, "198.51.100.1"},
		{"a chain of trusted proxies is walked", "10.1.2.3:5000", []string{"198.51.100.1, 10.9.9.9"}, true, "198.51.100.1"},
		{"several header lines are one list", "10.1.2.3:5000", []string{"1.1.1.1", "198.51.100.1, 10.9.9.9"}, true, "198.51.100.1"},
		{"an entry with a port", "10.1.2.3:5000", []string{"[2001:db8::1]:4711"}, true, "2001:db8::1"},
		{"garbage left of the client is never read", "10.1.2.3:5000", []string{"not-an-ip, 198.51.100.1"}, true, "198.51.100.1"},
		{"empty list elements are ignored", "10.1.2.3:5000", []string{"198.51.100.1, ,", ""}, true, "198.51.100.1"},
		{"a zone is dropped from the peer", "[fe80::1%eth0]:5000", nil, false, "fe80::1"},
		{"a zone is dropped from a hop", "10.1.2.3:5000", []string{"fe80::7%25eth1", "[fe80::8%eth2]:80"}, true, "fe80::8"},
		{"a zone is dropped from a hop without a port", "10.1.2.3:5000", []string{"fe80::7%eth1"}, true, "fe80::7"},
		{"all hops trusted: the leftmost", "10.1.2.3:5000", []string{"10.4.4.4"}, true, "10.4.4.4"},
		{"no header from a trusted proxy: the proxy", "10.1.2.3:5000", nil, true, "10.1.2.3"},
		{"an IPv4-mapped peer counts as IPv4", "[::ffff:10.1.2.3]:5000", []string{"198.51.100.1"}, true, "198.51.100.1"},
		{"IPv6 loopback proxy", "[::1]:5000", []string{"2001:db8::2"}, true, "2001:db8::2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			trusted := proxies
			if !tt.trusted {
				trusted = nil
			}
			got, err := Resolve(tt.peer, tt.xff, trusted)
			if err != nil || got.String() != tt.want {
				t.Fatalf("Of = %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// TestAnUnreadableHopIsAnError: an entry a trusted proxy passed on that is
// not an address leaves the client unknown, which is an error naming it,
// not the proxy's own address (one bucket shared by every client).
func TestAnUnreadableHopIsAnError(t *testing.T) {
	t.Parallel()
	proxies, err := ParsePrefixes("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, xff := range [][]string{{"1.1.1.1, not-an-ip"}, {"unknown"}, {"198.51.100.1, 203.0.113.9:port, 10.0.0.2"}} {
		got, err := Resolve("10.1.2.3:5000", xff, proxies)
		if err == nil || !strings.Contains(err.Error(), "X-Forwarded-For") {
			t.Errorf("X-Forwarded-For %q: %v, %v; want an error naming the header", xff, got, err)
		}
	}
}

func TestParsePrefixesRefusesGarbage(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "10.0.0.0/33", "example.com", "10.0.0.1/8/2"} {
		if _, err := ParsePrefixes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
