// Package testenv is what tests need of the machine they run on: local
// addresses with free ports, and the programs they drive.
package testenv

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// FreeAddr returns a 127.0.0.1 address with a port the OS picked (and
// freed again: a test that must name an address before it listens).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
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
