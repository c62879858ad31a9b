// @limitnode/client: a client of limitnode's HTTP API for Node.

export { Limiter, rateLimitHeaders } from "./client.js";
export type { CallOptions, Decision, FailurePolicy, Lease, LimiterOptions, RetryEvent } from "./client.js";
export { LeaseLostError, LeaseRefusedError, LimitnodeError, UnavailableError } from "./errors.js";
export { rateLimit } from "./middleware.js";
export type { RateLimitHandler, RateLimitOptions } from "./middleware.js";
export type {
  AllowRequest,
  AllowResponse,
  BatchDecision,
  BatchError,
  Check,
  ErrorBody,
  LeaseDenied,
  LeaseGranted,
  LeaseRequest,
  Limit,
} from "./types.js";
export type { components, paths } from "./openapi.js";
