// Package testenv is what the module's tests need of the machine they run
// on: ports they hold, the programs they drive, and the one way they wait.
package testenv

import (
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// FreeAddr returns a free 127.0.0.1 address, for a test that must name an
// address before something listens on it (or listen on it again after a
// restart). The port is below the range the OS hands out for port 0, so
// that a server another test starts on port 0 cannot take it in between;
// where that range is unknown, it is one the OS picked.
func FreeAddr(t testing.TB) string {
	t.Helper()
	if low := ephemeralLow(); low > minFreePort+1000 {
		for range 100 {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(minFreePort+rand.IntN(low-minFreePort)))
			if ln, err := net.Listen("tcp", addr); err == nil {
				ln.Close()
				return addr
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// minFreePort is the lowest port FreeAddr picks: above the well-known and
// most registered services' ports.
const minFreePort = 20000

// ephemeralLow is the lowest port the OS hands out for port 0, or 0 where
// it cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0
	}
	low, _ := strconv.Atoi(fields[0])
	return low
}

// NeedProgram returns the path of the program name. When it is missing the
// test is skipped, except in CI (CI=true), where .ci/run installs it and
// its absence is a failure.
func NeedProgram(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed; .ci/run installs it", name)
		}
		t.Skipf("%s is not installed (apt-get install %s); CI runs this test", name, name)
	}
	return path
}

// NeedPrograms is NeedProgram for each of names.
func NeedPrograms(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		NeedProgram(t, name)
	}
}
