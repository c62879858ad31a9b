package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/limitnode/limitnode/internal/testenv"
)

// The package's tests start nodes in two ways: in the test's own process
// (run, as main calls it: startNode), or as the binary in a process of its
// own (startProcess). Either listens on ports the OS picks (port 0) and
// tells them in its -addr-file, which the test reads: a test knows its
// node's addresses because its node wrote them, never by guessing that a
// port is free. A node that must be named before it starts (in the -join
// of the others) or must come back on its address after a restart, in the
// test's process, listens on a port the test holds (holdAddr).

// heldPorts are the ports this package's tests hold, by address: a node
// started in the test's process on one is lent it instead of binding it.
var heldPorts sync.Map // address → *testenv.Port

func init() {
	listen = func(network, addr string) (net.Listener, error) {
		if p, ok := heldPorts.Load(addr); ok {
			return p.(*testenv.Port).Listener()
		}
		return net.Listen(network, addr)
	}
}

// holdAddr holds a 127.0.0.1 port for the rest of the test and returns its
// address, for a node started in the test's process: the port is the
// test's from now on, across the node's restarts.
func holdAddr(t *testing.T) string {
	t.Helper()
	p := testenv.HoldPort(t)
	heldPorts.Store(p.Addr(), p)
	t.Cleanup(func() { heldPorts.Delete(p.Addr()) })
	return p.Addr()
}

// newAddrFile is a path for a node's -addr-file, in a directory of its
// own.
func newAddrFile(t *testing.T) string {
	return filepath.Join(t.TempDir(), "addrs.json")
}

// readAddrFile reads what a node wrote to its -addr-file; false while
// there is no such file.
func readAddrFile(t *testing.T, path string) (boundAddrs, bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return boundAddrs{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var a boundAddrs
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("the node's -addr-file %s: %v\n%s", path, err, data)
	}
	return a, true
}

// running is a node started in the test's process.
type running struct {
	addr  string     // its HTTP address
	addrs boundAddrs // what it wrote to its -addr-file
	done  chan error
}

func startNode(t *testing.T, ctx context.Context, args []string, vars map[string]string) running {
	t.Helper()
	return startLoggingTo(t, ctx, args, vars, io.Discard)
}

// startLoggingTo starts a node that logs to logs, and returns once it
// serves.
func startLoggingTo(t *testing.T, ctx context.Context, args []string, vars map[string]string, logs io.Writer) running {
	t.Helper()
	addrFile := newAddrFile(t)
	args = append(slices.Clone(args), "-addr-file", addrFile)
	ready := make(chan string, 1)
	r := running{done: make(chan error, 1)}
	exited := make(chan struct{})
	go func() {
		err := run(ctx, args, env(vars), logs, ready)
		close(exited)
		r.done <- err
	}()
	// A node whose context the test ended may still be closing its stores
	// when the test returns: the test's temporary directories, its data
	// directory among them, are removed only once it has exited.
	t.Cleanup(func() {
		if ctx.Err() == nil {
			return
		}
		select {
		case <-exited:
		case <-time.After(testenv.WaitTimeout):
			t.Errorf("the node was still running %v after its context ended", testenv.WaitTimeout)
		}
	})
	select {
	case r.addr = <-ready:
	case err := <-r.done:
		t.Fatalf("node exited early: %v", err)
	case <-time.After(testenv.WaitTimeout):
		t.Fatal("node did not become ready")
	}
	var ok bool
	if r.addrs, ok = readAddrFile(t, addrFile); !ok {
		t.Fatalf("the node serves but wrote no -addr-file %s", addrFile)
	}
	return r
}

// binary is the command built from this tree, once for the package's
// tests.
var binary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "limitnode-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "limitnode")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", errors.New("go build: " + err.Error() + "\n" + string(out))
	}
	return bin, nil
})

// buildBinary returns the command built from this tree.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := binary(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// process is a node running the binary in a process of its own.
type process struct {
	t        *testing.T
	cmd      *exec.Cmd
	out      testenv.SyncBuffer // what it printed, stdout and stderr
	addrFile string
	addrs    boundAddrs // what it wrote to its -addr-file
	exited   chan struct{}
	err      error // the process's exit, once exited is closed
}

// startProcess runs name with args, the command of a node (the binary, or
// a shell that ends by running it) whose arguments include -addr-file
// addrFile, and returns once the node has written that file. A node that
// exits first fails the test with its output. The process is killed at
// the end of the test.
func startProcess(t *testing.T, addrFile, name string, args ...string) *process {
	t.Helper()
	p, listens := launch(t, addrFile, name, args...)
	if !listens {
		t.Fatalf("the node exited before it listened: %v\n%s", p.err, p.out.String())
	}
	return p
}

// launch starts the command of a node and waits until the node writes its
// -addr-file (it listens) or exits (it does not).
func launch(t *testing.T, addrFile, name string, args ...string) (*process, bool) {
	t.Helper()
	if !slices.Contains(args, addrFile) {
		t.Fatalf("the node's arguments %q lack -addr-file %s", args, addrFile)
	}
	p := &process{t: t, cmd: exec.Command(name, args...), addrFile: addrFile, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.kill)
	listens := false
	testenv.WaitFor(t, "the node to write its -addr-file", func() bool {
		p.addrs, listens = readAddrFile(t, addrFile)
		return listens || p.hasExited()
	})
	return p, listens
}

// startBinary runs the binary with args and -addr-file, as startProcess.
func startBinary(t *testing.T, args ...string) *process {
	t.Helper()
	addrFile := newAddrFile(t)
	return startProcess(t, addrFile, buildBinary(t), append(slices.Clone(args), "-addr-file", addrFile)...)
}

func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop ends the node as SIGTERM does, and waits for it.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.exited
}

// kill ends the node at once, as a crash, and waits for it.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// restartOn runs the binary again with args, on the HTTP and Raft
// addresses the node had: the other members and the cluster's
// configuration name its Raft address. The binary is a process of its
// own, so the test cannot hold its ports while it is down: they are
// released when it exits and bound again here. Another process may have
// taken one in between (a port the OS picked for its own listener): the
// node then exits saying "address already in use", and the restart is
// tried again, since the taker may be short-lived, for at most
// testenv.WaitTimeout before the test fails saying so.
func (p *process) restartOn(args ...string) *process {
	t := p.t
	t.Helper()
	args = append([]string{"-http", p.addrs.HTTP, "-raft", p.addrs.Raft}, args...)
	for deadline := time.Now().Add(testenv.WaitTimeout); ; time.Sleep(100 * time.Millisecond) {
		addrFile := newAddrFile(t)
		again, listens := launch(t, addrFile, p.cmd.Path, append(slices.Clone(args), "-addr-file", addrFile)...)
		switch {
		case listens:
			return again
		case !strings.Contains(again.out.String(), "address already in use"):
			t.Fatalf("the restarted node exited: %v\n%s", again.err, again.out.String())
		case time.Now().After(deadline):
			t.Fatalf("the node cannot restart on its addresses %s and %s: another process has taken one since it stopped\n%s", p.addrs.HTTP, p.addrs.Raft, again.out.String())
		}
	}
}
