// Package buildinfo names the build of the running binary, for the status
// page, /v1/stats and limitnode version.
package buildinfo

import (
	"runtime/debug"
	"strings"
	"sync"
)

// Version is the binary's module version (a release tag, or the
// pseudo-version Go derives from a checkout's commit) or "devel", then,
// when Go recorded them and the version does not name them already, the
// commit it was built from, "+dirty" if the tree had changes, and the
// commit's time: "v1.2.0", "devel 3f2a9c1b8d7e+dirty 2026-12-01T10:37:09Z".
// A binary built without VCS information (go run, -buildvcs=false) is
// "devel".
var Version = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return describe(info.Main.Version, info.Settings)
})

func describe(version string, settings []debug.BuildSetting) string {
	if version == "" || version == "(devel)" {
		version = "devel"
	}
	parts := []string{version}
	var revision, modified, at string
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		case "vcs.time":
			at = s.Value
		}
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	// Go's pseudo-version of a checkout names the commit already.
	if revision != "" && !strings.Contains(version, revision) {
		if modified == "true" {
			revision += "+dirty"
		}
		parts = append(parts, revision)
	}
	if at != "" {
		parts = append(parts, at)
	}
	return strings.Join(parts, " ")
}
