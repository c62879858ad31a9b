package main

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The doc scripts run as the pages write them, each naming its ports before
// anything listens on them (a node's -http, then curl's URL), so the test
// cannot let the OS pick them as it does everywhere else: it moves each page
// port to one it picks (scriptAddr). A port it picks is
//   - below the range the OS hands out for port 0 and for outgoing
//     connections, so that no program of this machine gets it unasked,
//     and above the well-known and most registered services' ports and
//     the pages' own (all below minScriptPort);
//   - locked for as long as the test runs (lockPort), so that two scripts,
//     or two runs of the suite at once, never share one;
//   - one nothing listens on when picked, and nothing answers on when the
//     script starts (portMap.mustBeSilent).

// minScriptPort is the lowest port scriptAddr picks.
const minScriptPort = 20000

// scriptAddr picks a 127.0.0.1 address for a doc script, as above.
func scriptAddr(t *testing.T) string {
	t.Helper()
	high := ephemeralLow()
	for range 200 {
		port := minScriptPort + rand.IntN(high-minScriptPort)
		release, ok := lockPort(port)
		if !ok {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			release()
			continue
		}
		ln.Close()
		t.Cleanup(release)
		return addr
	}
	t.Fatalf("no port between %d and %d is free and unlocked for a doc script", minScriptPort, high)
	return ""
}

// ephemeralLow is the lowest port the OS hands out for port 0 and outgoing
// connections: Linux's net.ipv4.ip_local_port_range, else 32768 (Linux's
// default; the BSDs and macOS start higher).
func ephemeralLow() int {
	const linuxDefault = 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return linuxDefault
	}
	if low, err := strconv.Atoi(fields[0]); err == nil && low > minScriptPort+1000 {
		return low
	}
	return linuxDefault
}
