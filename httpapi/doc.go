// Package httpapi is limitnode's HTTP API (the contract in the README and in
// shared/API.md): it decodes and validates requests, asks a Limiter, and
// turns decisions into status codes, JSON bodies and the RateLimit and
// Retry-After headers.
//
// It knows HTTP and nothing of Raft: it depends on the small Limiter
// interface it declares, which *cluster.Node implements, so it is tested
// with a fake. Every size limit is explicit (MaxBodyBytes, MaxKeyBytes, ...)
// and every error is a JSON body naming the field at fault.
package httpapi
