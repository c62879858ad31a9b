// Package testenv is what the module's tests need of the machine they run
// on: ports they hold, the programs they drive, and the one way they wait.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

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
