package main

import (
	"sync/atomic"

	"github.com/limitnode/limitnode/cluster"
)

// seedingNode is the node as its APIs serve it. While the node stores what
// its flags seed (-policies, -rls-config) into a cluster it forms alone, it
// says it is not ready, so that nothing asked once /readyz turns 200 (a
// script's rls list, a Kubernetes readiness probe) finds the seed missing.
type seedingNode struct {
	*cluster.Node
	storing atomic.Bool
}

// Ready is the node's readiness, or why it is not ready while it stores
// its seed.
func (s *seedingNode) Ready() string {
	if s.storing.Load() {
		return "storing the policies and domains its flags give (-policies, -rls-config)"
	}
	return s.Node.Ready()
}
