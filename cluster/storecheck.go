package cluster

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"go.etcd.io/bbolt"
)

// checkStore opens the Raft log's bbolt file read-only and checks every page
// before Raft opens it, so that a damaged file (truncated, zeroed pages)
// stops the node with one line naming it instead of a segmentation fault or
// a panic deep inside bbolt. A fault reading the mapped file becomes a panic
// here (debug.SetPanicOnFault), and a panic becomes the error.
func checkStore(path string) (err error) {
	if _, statErr := os.Stat(path); errors.Is(statErr, os.ErrNotExist) {
		return nil // a new node: nothing to check
	}
	damaged := func(why any) error {
		return fmt.Errorf("cluster: %s is damaged (%v); restore the node from a backup or remove its data directory and join it again", path, why)
	}
	done := make(chan error, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() {
			if p := recover(); p != nil {
				done <- damaged(p)
			}
		}()
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			done <- err
			return
		}
		defer db.Close()
		err = db.View(func(tx *bbolt.Tx) error {
			for problem := range tx.Check() {
				return problem
			}
			return nil
		})
		if err != nil {
			done <- damaged(err)
			return
		}
		done <- nil
	}()
	return <-done
}
