package cluster

import (
	"net"
	"testing"
)

// TestTheAdvertisedRaftAddress: the address the other members are told is
// the advertise flag when given (its port 0 standing for the port bound),
// else the address bound; an address no one can dial is refused.
func TestTheAdvertisedRaftAddress(t *testing.T) {
	t.Parallel()
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41234}
	every := &net.TCPAddr{IP: net.IPv4zero, Port: 41234}
	tests := []struct {
		name      string
		listening net.Addr
		flag      string
		want      string // "" for an error
	}{
		{"the address bound", loopback, "", "127.0.0.1:41234"},
		{"the flag as given", every, "limitnode-0.peers:7071", "limitnode-0.peers:7071"},
		{"the flag's port 0 is the port bound", every, "my-host:0", "my-host:41234"},
		{"every interface without the flag", every, "", ""},
		{"an unspecified IP in the flag", loopback, "0.0.0.0:7071", ""},
		{"an unspecified IPv6 in the flag", loopback, "[::]:0", ""},
		{"a flag without a host", loopback, ":7071", ""},
		{"a flag that is no address", loopback, "my-host", ""},
	}
	for _, tt := range tests {
		got, err := advertisedRaftAddr(tt.listening, tt.flag)
		if tt.want == "" && err == nil {
			t.Errorf("%s: %q, want an error", tt.name, got)
		}
		if tt.want != "" && (err != nil || got != tt.want) {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}
