// Package httpapi is limitnode's HTTP API, whose contract is the README's
// "HTTP API" section and api/openapi.yaml: it decodes JSON bodies into
// package contract's requests, asks a Limiter, and turns decisions into
// status codes, JSON bodies and the RateLimit and Retry-After headers.
//
// It knows HTTP and nothing of Raft: it depends on the small Limiter
// interface it declares, which *cluster.Node implements, so it is tested
// with a fake and does not import package cluster. What a valid request is
// lives in package contract; this package checks only what JSON alone can
// get wrong (a missing field, a malformed body). Every size limit is
// explicit (MaxBodyBytes, contract.MaxKeyBytes, ...) and every error is a
// JSON body naming the field at fault.
//
// Files: handler.go (routes), body.go (reading and writing JSON),
// errors.go (errors to statuses, in one place), allow_request.go and
// allow.go (POST /v1/allow and /v1/allow/batch), headers.go (RateLimit and
// Retry-After), policies.go, leases.go, members.go, health.go, metrics.go,
// server.go (an http.Server with the timeouts a public port needs).
package httpapi
