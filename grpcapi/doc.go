// Package grpcapi is limitnode's gRPC API: Envoy's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit), the
// standard health service (grpc.health.v1.Health) and server reflection, so
// that Envoy and everything built on it can use a limitnode cluster as its
// rate limit service, and grpcurl can explore it.
//
// A ShouldRateLimit request becomes one rls.Query: the node decides every
// descriptor's limit in one Raft entry, all or nothing (see
// cluster.Node.ShouldRateLimit), matched against the domain's configuration
// as the log orders it. The answer carries envoyproxy/ratelimit's codes and
// statuses and, in response_headers_to_add, the rate-limit headers the HTTP
// API sends.
//
// With an Authorizer, ShouldRateLimit needs a token with the decide role in
// the "authorization" metadata ("Bearer <token>"), reflection one with the
// read role; health is always open, as /healthz and /readyz are. Since an
// open Watch stream lasts as long as its client likes, the streams open at
// once are capped in all and per client address (Options.MaxStreams), and
// the calls of one connection by MaxConcurrentStreams.
package grpcapi
