// @limitnode/client: a client of limitnode's HTTP API for Node.

export { Limiter } from "./client.js";
export { rateLimitHeaders } from "./headers.js";
export type { CallOptions, Decision, FailurePolicy, Lease, LimiterOptions, RetryEvent } from "./client.js";
export type { KeyListing, Listing } from "./admin.js";
export { maxRetryAfterSeconds } from "./answers.js";
export { Reservation } from "./settle.js";
export { maxAnswerBytes } from "./transport.js";
export { LeaseLostError, LeaseRefusedError, LimitnodeError, UnavailableError } from "./errors.js";
export { rateLimit } from "./middleware.js";
export type { RateLimitHandler, RateLimitOptions } from "./middleware.js";
export type {
  AllowRequest,
  AllowResponse,
  BatchDecision,
  BatchError,
  Block,
  BlockPage,
  Blocked,
  Check,
  CheckResult,
  DeniedBy,
  ErrorBody,
  KeyLimit,
  KeyPage,
  KeyReset,
  KeyState,
  LeaseDenied,
  LeaseGranted,
  LeaseRequest,
  Limit,
  LocalShares,
  Penalty,
  Policy,
  PolicyPage,
  PolicyRequest,
  SettleRequest,
  Settlement,
  ShareReturn,
} from "./types.js";
export type { components, paths } from "./openapi.js";
