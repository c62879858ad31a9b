package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"
)

// TestProfilesAreServedToAdminsOnlyWithPprof: -pprof serves Go's profiles
// under /debug/pprof/ on the HTTP port, to the admin role only; without it
// the path is not served at all.
func TestProfilesAreServedToAdminsOnlyWithPprof(t *testing.T) {
	t.Parallel()
	adminToken, adminEntry := newToken(t, "operator", "admin")
	readToken, readEntry := newToken(t, "dashboard", "read")
	for _, profiling := range []bool{false, true} {
		dir := t.TempDir()
		tokens := filepath.Join(dir, "tokens.json")
		writeTokenFile(t, tokens, adminEntry, readEntry)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		args := []string{"-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", filepath.Join(dir, "data"), "-auth", tokens}
		if profiling {
			args = append(args, "-pprof")
		}
		n := startNode(t, ctx, args, nil)
		get := func(path, token string) (int, []byte) {
			t.Helper()
			req, err := http.NewRequest(http.MethodGet, "http://"+n.addr+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, body
		}
		if !profiling {
			if status, body := get("/debug/pprof/", adminToken); status != http.StatusNotFound {
				t.Fatalf("without -pprof, an admin's GET /debug/pprof/: %d %s, want 404", status, body)
			}
			continue
		}
		tests := []struct {
			name       string
			path       string
			token      string
			wantStatus int
			wantBody   []byte // a prefix of the body, when set
		}{
			{"the index to an admin", "/debug/pprof/", adminToken, 200, nil},
			{"the goroutines to an admin", "/debug/pprof/goroutine?debug=1", adminToken, 200, []byte("goroutine profile:")},
			{"a one-second CPU profile to an admin (gzip)", "/debug/pprof/profile?seconds=1", adminToken, 200, []byte{0x1f, 0x8b}},
			{"a CPU profile of 0 seconds", "/debug/pprof/profile?seconds=0", adminToken, 400, []byte(`{"error":"seconds must be`)},
			{"the index to a read token", "/debug/pprof/", readToken, 403, nil},
			{"a CPU profile to a read token", "/debug/pprof/profile?seconds=1", readToken, 403, nil},
			{"the index without a token", "/debug/pprof/", "", 401, nil},
		}
		for _, tt := range tests {
			status, body := get(tt.path, tt.token)
			if status != tt.wantStatus || (tt.wantBody != nil && !bytes.HasPrefix(body, tt.wantBody)) {
				t.Errorf("%s: %d %.80q, want %d starting %q", tt.name, status, body, tt.wantStatus, tt.wantBody)
			}
		}
	}
}
