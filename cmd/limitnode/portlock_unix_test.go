//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// lockPort takes an exclusive lock on port among the processes of this
// machine that run the doc scripts, and returns its release; false when
// another holds it. The lock is a file's flock: the OS drops it when the
// holder exits, however it exits.
func lockPort(port int) (release func(), ok bool) {
	dir := filepath.Join(os.TempDir(), "limitnode-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, false
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}
