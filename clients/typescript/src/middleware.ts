// rateLimit: a Node http handler, in Express's (req, res, next) form, that
// asks the cluster before a request goes on and answers a denial itself.

import type { IncomingMessage, ServerResponse } from "node:http";

import type { Decision, Limiter } from "./client.js";
import type { AllowRequest } from "./types.js";

/** RateLimitOptions configures rateLimit. */
export interface RateLimitOptions<Req extends IncomingMessage = IncomingMessage> {
  /**
   * The request to decide for an incoming one: its key (an API key, the
   * user your authentication found, the client's address) and limit or
   * policy, or several checks. Return null to let the request through
   * unlimited.
   */
  request: (req: Req) => AllowRequest | null | Promise<AllowRequest | null>;
  /**
   * Answers a request whose limit could not be asked: `request` threw, or
   * the cluster refused its request as invalid (a LimitnodeError: fix the
   * request function). Default: log it and answer 500.
   */
  onError?: (error: unknown, req: Req, res: ServerResponse) => void;
}

/** The handler rateLimit returns: Express middleware, or a wrapper for node:http's request listener. */
export type RateLimitHandler<Req extends IncomingMessage = IncomingMessage> = (
  req: Req,
  res: ServerResponse,
  next: () => void,
) => void;

/**
 * rateLimit returns a handler that asks `limiter` for each request's
 * decision. An admitted request gets the cluster's rate-limit headers on
 * its response and goes on (`next()`); a denied one is answered 429 with
 * the headers the cluster sent (RateLimit-*, RateLimit, Retry-After; no
 * internal header, such as Limitnode-Denied-By) and the decision's
 * top-level fields as JSON, `denied_by` and `blocked` included, never a key
 * (not its checks, nor a block's key, which may name your users). A
 * decision of the failure policy carries X-Limitnode-Degraded: true.
 *
 *     app.use(rateLimit(limiter, { request: (req) => ({ key: `ip:${req.socket.remoteAddress}`, limit }) }));
 *     http.createServer((req, res) => limit(req, res, () => app(req, res)));
 */
export function rateLimit<Req extends IncomingMessage = IncomingMessage>(
  limiter: Limiter,
  options: RateLimitOptions<Req>,
): RateLimitHandler<Req> {
  const onError = options.onError ?? answerError;
  return (req, res, next) => {
    void (async () => {
      const allowReq = await options.request(req);
      if (allowReq === null) {
        next();
        return;
      }
      const decision = await limiter.allow(allowReq);
      if (decision.allowed) {
        setHeaders(res, decision, false);
        next();
        return;
      }
      setHeaders(res, decision, true);
      res.statusCode = 429;
      res.setHeader("Content-Type", "application/json");
      res.end(`${JSON.stringify(denialBody(decision))}\n`);
    })().catch((error: unknown) => onError(error, req, res));
  };
}

/**
 * denialBody is what a denied request is answered with: the decision's
 * top-level fields, as the cluster's /v1/allow answered them (what denied it
 * included), without its checks or a block's key, which may name your
 * users.
 */
function denialBody(d: Decision): Record<string, unknown> {
  const { allowed, limit, remaining, reset_after_ms, retry_after_ms, duplicate, denied_by } = d;
  const body: Record<string, unknown> = { allowed, limit, remaining, reset_after_ms, retry_after_ms };
  if (duplicate) body.duplicate = duplicate;
  if (d.blocked !== undefined) {
    const { key, ...blocked } = d.blocked;
    body.blocked = blocked;
  }
  if (denied_by !== undefined) body.denied_by = denied_by;
  return body;
}

function setHeaders(res: ServerResponse, decision: Decision, withRetry: boolean): void {
  for (const [name, value] of Object.entries(decision.headers)) {
    if (withRetry || name !== "Retry-After") {
      res.setHeader(name, value);
    }
  }
}

function answerError(error: unknown, req: IncomingMessage, res: ServerResponse): void {
  console.error(`limitnode: the rate limit of ${req.method} ${req.url} could not be asked:`, error);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.statusCode = 500;
  res.setHeader("Content-Type", "application/json");
  res.end(`${JSON.stringify({ error: "the rate limit of this route is misconfigured", code: "internal" })}\n`);
}
