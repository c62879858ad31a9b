// The rate-limit headers of a decision: those a node sent, picked under
// their canonical names, or the same computed from a decision's fields when
// no node sent any (a batch's item, a share's admission, the failure
// policy's decision).

import type { AllowResponse } from "./types.js";

/** The headers of an allow answer that tell a caller its limit, as the cluster spells them. */
export const rateLimitHeaders = [
  "RateLimit-Limit",
  "RateLimit-Remaining",
  "RateLimit-Reset",
  "RateLimit-Policy",
  "RateLimit",
  "Retry-After",
] as const;

/** ceilSeconds is ms in whole seconds, rounded up. */
export const ceilSeconds = (ms: number) => (ms <= 0 ? 0 : Math.ceil(ms / 1000));

/** computedHeaders are the rate-limit headers of a decision no node sent headers for, computed from its fields. */
export function computedHeaders(answer: AllowResponse): Record<string, string> {
  const headers: Record<string, string> = {
    "RateLimit-Limit": String(answer.limit),
    "RateLimit-Remaining": String(answer.remaining),
    "RateLimit-Reset": String(ceilSeconds(answer.reset_after_ms)),
  };
  if (!answer.allowed) {
    headers["Retry-After"] = String(Math.max(ceilSeconds(answer.retry_after_ms), 1));
  }
  return headers;
}

/** canonicalHeaders picks the rate-limit headers of an answer, under their canonical names. */
export function canonicalHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of rateLimitHeaders) {
    const value = headers.get(name);
    if (value !== null) out[name] = value;
  }
  return out;
}
