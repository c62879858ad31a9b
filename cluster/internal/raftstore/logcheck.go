package raftstore

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
)

// CheckLog opens the Raft log's bbolt file read-only and checks every page
// before Raft opens it, so that a damaged file (truncated, zeroed pages)
// stops the node with one line naming it instead of a segmentation fault or
// a panic deep inside bbolt. A fault reading the mapped file becomes a panic
// here (debug.SetPanicOnFault), and a panic becomes the error. Both hold on
// this goroutine only, and bbolt's Tx.Check runs on one of its own: so every
// page the buckets reach is read here first (touchAll), and Check, which
// then reads nothing that faults, runs after.
func CheckLog(path string) (err error) {
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
			if err := touchAll(tx); err != nil {
				return err
			}
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

// touchAll reads the first and last byte of every key and value of every
// bucket, nested ones too, so that every page they are on is read on the
// calling goroutine.
func touchAll(tx *bbolt.Tx) error {
	var sink byte
	var walk func(b *bbolt.Bucket) error
	walk = func(b *bbolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			sink ^= edges(k) ^ edges(v)
			if v == nil {
				if nested := b.Bucket(k); nested != nil {
					return walk(nested)
				}
			}
			return nil
		})
	}
	err := tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
		sink ^= edges(name)
		return walk(b)
	})
	touched.Store(uint32(sink))
	return err
}

// touched keeps touchAll's reads from being optimised away.
var touched atomic.Uint32

// edges is the first byte of p xor its last, or 0.
func edges(p []byte) byte {
	if len(p) == 0 {
		return 0
	}
	return p[0] ^ p[len(p)-1]
}
