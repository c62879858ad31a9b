package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestWriteERLConfigPutsBenchDomainWhereTheReferenceReadsIt(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := writeERLConfig(root); err != nil {
		t.Fatal(err)
	}
	// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml, the settings env gives.
	env := erlSettings{runtimeRoot: root}.env()
	sub := strings.TrimPrefix(env[slices.IndexFunc(env, func(v string) bool { return strings.HasPrefix(v, "RUNTIME_SUBDIRECTORY=") })], "RUNTIME_SUBDIRECTORY=")
	matches, err := filepath.Glob(filepath.Join(root, sub, "config", "*.yaml"))
	if err != nil || len(matches) != 1 {
		t.Fatalf("configuration files %v, %v", matches, err)
	}
	data, err := os.ReadFile(matches[0])
	if err != nil || string(data) != benchDomain {
		t.Fatalf("%s holds %q, %v", matches[0], data, err)
	}
}

func TestERLSettingsEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		localCache bool
		want       string
	}{
		{"without the local cache", false, "LOCAL_CACHE_SIZE_IN_BYTES=0"},
		{"with the local cache", true, "LOCAL_CACHE_SIZE_IN_BYTES=1048576"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := erlSettings{grpcPort: 4321, redisAddr: "127.0.0.1:6380", runtimeRoot: "/tmp/x", localCache: tt.localCache}.env()
			for _, want := range []string{
				tt.want, "GRPC_HOST=127.0.0.1", "GRPC_PORT=4321", "HOST=127.0.0.1", "PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
				"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=127.0.0.1:6380", "USE_STATSD=false",
				"RUNTIME_ROOT=/tmp/x", "RUNTIME_SUBDIRECTORY=" + erlSubdirectory, "RUNTIME_WATCH_ROOT=false",
			} {
				if !slices.Contains(env, want) {
					t.Errorf("env %q lacks %q", env, want)
				}
			}
			seen := map[string]bool{}
			for _, v := range env {
				name, _, _ := strings.Cut(v, "=")
				if seen[name] {
					t.Errorf("%s given twice in %q", name, env)
				}
				seen[name] = true
			}
		})
	}
}

// TestStartERLReportsAServiceThatExits starts a program that exits at once
// in the reference's place: startERL must say so with the program's log,
// and leave no directory behind.
func TestStartERLReportsAServiceThatExits(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where startERL makes its directory
	fake := filepath.Join(t.TempDir(), "fake-erl")
	script := "#!/bin/sh\necho \"cannot reach redis at $REDIS_URL\" >&2\nexit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := startERL(fake, "127.0.0.1:1", false)
	if err == nil {
		srv.stop()
		t.Fatal("started a service that exits")
	}
	for _, want := range []string{"exited before answering", "exit status 3", "cannot reach redis at 127.0.0.1:1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left %v behind in %s", left, tmp)
	}
}
