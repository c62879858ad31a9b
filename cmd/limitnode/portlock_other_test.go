//go:build !unix

package main

import "sync"

// lockedPorts are the ports this process's doc scripts hold; without
// flock, a lock only keeps two scripts of this process apart.
var lockedPorts sync.Map

// lockPort takes port for a doc script of this process and returns its
// release; false when another holds it.
func lockPort(port int) (release func(), ok bool) {
	if _, taken := lockedPorts.LoadOrStore(port, true); taken {
		return nil, false
	}
	return func() { lockedPorts.Delete(port) }, true
}
