// Package httpapi is limitnode's HTTP API, whose contract is docs/http-api.md
// and api/openapi.yaml: it decodes JSON bodies (package api/wire, the one
// definition of every body, shared with package client) into package
// contract's requests, asks the node, and turns decisions into status codes,
// JSON bodies and the RateLimit and Retry-After headers.
//
// It knows HTTP and nothing of Raft. It serves one backend, a Decider, and
// depends on one small interface per job (PolicyStore, RLSStore,
// LeaseKeeper, Membership, Backups, Observer, KeyStore, BlockList,
// AuditLog, Settler), found by type assertion: *cluster.Node implements
// every one, a route of a job the backend lacks answers 501, a handler sees
// the few methods it calls and tests fake only those; it does not import
// package cluster. What a valid request is lives in
// package contract; this package checks only what JSON alone can get wrong
// (a missing field, a malformed body, a name in the wrong case). Every size
// limit is explicit (MaxBodyBytes, contract.MaxKeyBytes, ...) and every
// error is a JSON body naming the field at fault; errors become statuses in
// one place.
//
// The routes, each with the role a token needs, are in New; each resource
// has a file of its own, named after it.
package httpapi
