package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"a release", "v1.2.0", nil, "v1.2.0"},
		{"go run: no VCS information", "(devel)", nil, "devel"},
		{"a build of a checkout", "(devel)", []debug.BuildSetting{{Key: "vcs.revision", Value: "3f2a9c1b8d7e0011aa"}, {Key: "vcs.time", Value: "2026-12-01T10:37:09Z"}, {Key: "vcs.modified", Value: "false"}}, "devel 3f2a9c1b8d7e 2026-12-01T10:37:09Z"},
		{"a pseudo-version names the commit once", "v0.0.0-20261201114402-45d90ef54559+dirty", []debug.BuildSetting{{Key: "vcs.revision", Value: "45d90ef54559aabbcc"}, {Key: "vcs.modified", Value: "true"}}, "v0.0.0-20261201114402-45d90ef54559+dirty"},
		{"a checkout with changes", "(devel)", []debug.BuildSetting{{Key: "vcs.revision", Value: "3f2a9c1b8d7e0011aa"}, {Key: "vcs.modified", Value: "true"}}, "devel 3f2a9c1b8d7e+dirty"},
	}
	for _, tt := range tests {
		if got := describe(tt.version, tt.settings); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
