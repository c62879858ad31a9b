package main

import (
	"fmt"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// benchDomainName is the rate limit service domain every gRPC target asks.
const benchDomainName = "bench"

// benchDomain is that domain in envoyproxy/ratelimit's YAML. limitnode's
// targets store this text in their cluster and the erl targets give the
// same text to the reference's service, so both decide the same
// descriptors against the same limits. It uses only keys the reference
// knows: the reference refuses limitnode's algorithm and burst, so every
// limit is a fixed window, the reference's only algorithm. client and
// global allow a billion a second, as benchLimit, so they never deny;
// flood allows floodRate a second per value.
var benchDomain = fmt.Sprintf(`domain: %s
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: %d}
  - key: global
    rate_limit: {unit: second, requests_per_unit: %[2]d}
  - key: flood
    rate_limit: {unit: second, requests_per_unit: %[3]d}
`, benchDomainName, benchLimit.Rate, floodRate)

// benchHotDomainName is the domain of the grpc-hot targets, and
// benchHotDomain its configuration: one hot descriptor without
// local_shares and one with them (limitnode's extension, which the
// reference refuses, hence a domain of their own), each allowing a billion
// a second as benchLimit, so that they never deny.
const benchHotDomainName = "bench-hot"

var benchHotDomain = fmt.Sprintf(`domain: %s
descriptors:
  - key: hot
    rate_limit: {unit: second, requests_per_unit: %d}
  - key: hot_shared
    rate_limit: {unit: second, requests_per_unit: %[2]d, local_shares: {}}
`, benchHotDomainName, benchLimit.Rate)

// rlsLoad is what a gRPC target's ShouldRateLimit calls ask.
type rlsLoad int

const (
	// loadOne sends one descriptor, the caller's key: Envoy's rate limit
	// filter with one action. Never over the limit.
	loadOne rlsLoad = iota
	// loadTwo sends the caller's key and a global descriptor, as the filter
	// with two actions: the gRPC twin of http-multi. Never over the limit.
	loadTwo
	// loadFlood sends one of floodKeys hot values limited to floodRate a
	// second, as http-flood: nearly every answer is OVER_LIMIT.
	loadFlood
	// loadHot sends one hot descriptor of benchHotDomain without
	// local_shares, loadHotShared one with them: the gRPC twins of
	// http-hot and http-hot-shares. Never over the limit.
	loadHot
	loadHotShared
)

// domain is the domain the load's calls ask.
func (l rlsLoad) domain() string {
	if l == loadHot || l == loadHotShared {
		return benchHotDomainName
	}
	return benchDomainName
}

// descriptors returns the descriptors of a caller's seq-th call.
func (l rlsLoad) descriptors(e *environment, caller, seq int) []*ratelimitcommon.RateLimitDescriptor {
	one := func(key, value string) *ratelimitcommon.RateLimitDescriptor {
		return &ratelimitcommon.RateLimitDescriptor{Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: key, Value: value}}}
	}
	switch l {
	case loadTwo:
		return []*ratelimitcommon.RateLimitDescriptor{one("client", e.key(caller, seq)), one("global", "all")}
	case loadFlood:
		return []*ratelimitcommon.RateLimitDescriptor{one("flood", floodKey(caller))}
	case loadHot:
		return []*ratelimitcommon.RateLimitDescriptor{one("hot", hotKey)}
	case loadHotShared:
		return []*ratelimitcommon.RateLimitDescriptor{one("hot_shared", hotKey)}
	}
	return []*ratelimitcommon.RateLimitDescriptor{one("client", e.key(caller, seq))}
}

// requestsPerUnit is the limit benchDomain gives each of the load's
// descriptors: what every answer's current limit must say, so that a
// descriptor that matched nothing (which both services allow without
// counting) cannot pass for a decision.
func (l rlsLoad) requestsPerUnit() uint32 {
	if l == loadFlood {
		return floodRate
	}
	return uint32(benchLimit.Rate)
}
