package clients_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitnode/limitnode/internal/testenv"
)

// scratch holds what the tests share: the limitnode binary they build once.
var scratch string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "limitnode-clients-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scratch = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// limitnodeBinary builds cmd/limitnode from this tree, once, for the
// clients' tests to start their clusters with.
var limitnodeBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(scratch, "limitnode")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/limitnode")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/limitnode: %w\n%s", err, out)
	}
	return bin, nil
})

func mustBinary(t *testing.T) string {
	t.Helper()
	bin, err := limitnodeBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// step is one command of a client's suite, and what its failure means.
type step struct {
	what string
	args []string
}

// mustRun runs each step in dir with env, in order; a step that fails
// fails the test with its output.
func mustRun(t *testing.T, dir string, env []string, steps ...step) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, s.args[0], s.args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s (%s) failed: %v\n%s", s.what, strings.Join(s.args, " "), err, out)
		}
		t.Logf("%s: %s in %s\n%s", s.what, strings.Join(s.args, " "), time.Since(start).Round(time.Millisecond), lastLines(string(out), 8))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// mustCopy copies the file from, or the files under it (relative to the
// repository root), into the same place under to, leaving out the
// directories named in skip.
func mustCopy(t *testing.T, to, from string, skip ...string) {
	t.Helper()
	root := filepath.Join("..", from)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			for _, name := range skip {
				if d.Name() == name {
					return filepath.SkipDir
				}
			}
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", from, err)
	}
}

// TestTypeScriptClient runs clients/typescript's suite: npm ci from the
// lockfile (from the npm cache when it has the packages), the check that
// src/openapi.ts is what openapi-typescript makes of api/openapi.yaml, the
// build, and node's test runner on the built tests, which start their own
// clusters. It runs in a copy of the package (with the document and the
// page it reads), so that node_modules and build stay out of the tree.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "node", "npm")
	bin := mustBinary(t)
	root := t.TempDir()
	mustCopy(t, root, "clients/typescript", "node_modules", "build")
	mustCopy(t, root, "api/openapi.yaml")
	mustCopy(t, root, "docs/typescript.md")
	dir := filepath.Join(root, "clients", "typescript")
	env := append(os.Environ(), "LIMITNODE_BIN="+bin, "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	mustRun(t, dir, env,
		step{"installing the pinned tools", []string{"npm", "ci", "--prefer-offline", "--no-progress"}},
		step{"the generated types against api/openapi.yaml (npm run generate rewrites them)", []string{"npm", "run", "check-generated"}},
		step{"the build", []string{"npm", "run", "build"}},
	)
	tests, err := filepath.Glob(filepath.Join(dir, "build", "test", "*.test.js"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no built tests under %s (%v)", dir, err)
	}
	mustRun(t, dir, env, step{"the client's tests", append([]string{"node", "--test"}, tests...)})
}

// TestPythonClient runs clients/python's suite with unittest, against its
// own clusters; it includes installing the package with pip into a fresh
// virtual environment.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	testenv.NeedProgram(t, "python3")
	bin := mustBinary(t)
	dir, err := filepath.Abs("python")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "LIMITNODE_BIN="+bin, "PYTHONPATH="+filepath.Join(dir, "src"), "PYTHONDONTWRITEBYTECODE=1")
	mustRun(t, dir, env, step{"the client's tests", []string{"python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."}})
}
