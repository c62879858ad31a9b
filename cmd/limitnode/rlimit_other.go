//go:build !unix

package main

// descriptorLimit is 0 where the descriptor limit cannot be read: the caps
// are kept as given.
func descriptorLimit() uint64 { return 0 }
