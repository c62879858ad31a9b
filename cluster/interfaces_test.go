package cluster_test

import (
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/grpcapi"
	"github.com/limitnode/limitnode/httpapi"
)

// A node does every job of the HTTP and gRPC APIs.
var (
	_ httpapi.Decider     = (*cluster.Node)(nil)
	_ httpapi.PolicyStore = (*cluster.Node)(nil)
	_ httpapi.RLSStore    = (*cluster.Node)(nil)
	_ httpapi.LeaseKeeper = (*cluster.Node)(nil)
	_ httpapi.Membership  = (*cluster.Node)(nil)
	_ httpapi.Backups     = (*cluster.Node)(nil)
	_ httpapi.Observer    = (*cluster.Node)(nil)
	_ httpapi.KeyStore    = (*cluster.Node)(nil)
	_ httpapi.BlockList   = (*cluster.Node)(nil)
	_ httpapi.AuditLog    = (*cluster.Node)(nil)
	_ httpapi.Settler     = (*cluster.Node)(nil)
	_ grpcapi.Limiter     = (*cluster.Node)(nil)
)
