// Limiter: the calls of the HTTP API (allow, allow/batch, leases) against
// several nodes, with one retry rule and one failure policy.
//
// The retry rule. A request that provably never left (the connection could
// not be opened) goes to the next node at once. A request whose outcome is
// unknown (the connection broke after it was sent, or a node answered 503
// with Retry-After) is sent again only when the cluster answers a repeat
// once: an allow carries a request_id (one is generated when the caller
// gives none), so the cluster answers a retry with the first decision and
// charges once; renewing and releasing a lease are idempotent. A lease
// acquire is not retried after an unknown outcome: a second acquire could
// take a second slot. Every retry stays within the call's timeout, and a
// 503's Retry-After is waited out before the next try, or the call gives
// up at once when the wait would outlast the timeout.

import { durationMs } from "./duration.js";
import { LeaseLostError, LeaseRefusedError, LimitnodeError, UnavailableError } from "./errors.js";
import { LocalLimiter } from "./local.js";
import { baseURL, exchange, sleep } from "./transport.js";
import type { AllowRequest, AllowResponse, BatchDecision, BatchError, LeaseDenied, LeaseGranted, LeaseRequest } from "./types.js";

/**
 * FailurePolicy says what `allow` and `allowBatch` answer when the cluster
 * cannot decide (no node reachable, a 503 or 500, the timeout): "closed"
 * denies, "open" allows, "local" decides with an in-process limiter that
 * enforces this process's share of the limit (requests naming a policy,
 * which only the cluster knows, are denied), and "throw" throws the
 * UnavailableError. Such a decision is marked `degraded`.
 */
export type FailurePolicy = "closed" | "open" | "local" | "throw";

/** LimiterOptions configures a Limiter. */
export interface LimiterOptions {
  /** Node addresses, "127.0.0.1:7070" or base URLs ("https://limits.internal:7070"); any node answers every call. */
  nodes: string[];
  /** The time one call may take, retries included, in ms. Default 2000. */
  timeoutMs?: number;
  /** What to answer when the cluster cannot decide. Default "closed". */
  onFailure?: FailurePolicy;
  /** With "local": how many processes share each limit; each enforces 1/replicas of it. Default 1. */
  replicas?: number;
  /** With "local": the most keys the local limiter remembers before it starts over. Default 100,000. */
  maxLocalKeys?: number;
  /** A bearer token sent with every call (when the cluster runs with -auth). */
  token?: string;
  /** The fetch to call with. Default the global fetch. */
  fetch?: typeof fetch;
  /** Called before each retry, for logs and metrics. */
  onRetry?: (event: RetryEvent) => void;
  /** The local limiter's clock, in ms since the epoch. Default Date.now. */
  clock?: () => number;
}

/** RetryEvent describes a retry about to be made. */
export interface RetryEvent {
  /** The node whose attempt failed. */
  node: string;
  /** The attempt that failed, from 1. */
  attempt: number;
  /** The request_id the retry carries (allow and allowBatch's first). */
  requestId: string | undefined;
  /** Why: the fetch error or the 503's LimitnodeError. */
  reason: unknown;
  /** How long the retry waits first (a 503's Retry-After, or a backoff). */
  delayMs: number;
}

/** CallOptions are one call's own. */
export interface CallOptions {
  /** Aborts the call; an abort is thrown, never answered by the failure policy. */
  signal?: AbortSignal;
  /** The call's timeout instead of the Limiter's. */
  timeoutMs?: number;
}

/** Decision is an allow answer, with what a caller acts on. */
export interface Decision extends AllowResponse {
  /** 200 when allowed, 429 when denied. */
  status: 200 | 429;
  /**
   * The rate-limit headers to pass on, under their canonical names: those the
   * cluster sent (RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset,
   * RateLimit-Policy, RateLimit, Retry-After), or for a degraded decision
   * the same computed from it, with X-Limitnode-Degraded: true.
   */
  headers: Record<string, string>;
  /** The Retry-After of a denial in seconds (jittered by the cluster), else 0. */
  retryAfterSeconds: number;
  /** The ID of the leader that decided, when the node said. */
  leader: string | undefined;
  /** The request_id the request was sent with. */
  requestId: string;
  /** How many HTTP attempts the call made; 0 for a degraded decision. */
  attempts: number;
  /** True when the cluster could not decide and the failure policy answered. */
  degraded: boolean;
  /** Why the decision is degraded. */
  cause: unknown;
}

/** Lease is an acquire's answer: granted (with `id`) or not (with `retry_after_ms`). */
export type Lease = (LeaseGranted | LeaseDenied) & {
  /** The Retry-After of a refusal in seconds, else 0. */
  retryAfterSeconds: number;
};

/** The headers of an allow answer that tell a caller its limit, as the cluster spells them. */
export const rateLimitHeaders = [
  "RateLimit-Limit",
  "RateLimit-Remaining",
  "RateLimit-Reset",
  "RateLimit-Policy",
  "RateLimit",
  "Retry-After",
] as const;

/** How long the release that ends withLease may take, even after the caller's signal ended. */
const leaseReleaseTimeoutMs = 5000;

/** An answer that ended a call, with what the call went through to get it. */
interface Answered {
  status: number;
  headers: Headers;
  body: string;
  attempts: number;
  /** True when an earlier attempt's outcome was unknown. */
  retriedUnknown: boolean;
}

interface SendOptions extends CallOptions {
  retryUnknown: boolean;
  requestId?: string;
}

const monotonicMs = () => performance.now();

const ceilSeconds = (ms: number) => (ms <= 0 ? 0 : Math.ceil(ms / 1000));

/** newRequestId names a request for the cluster's deduplication: 36 characters, within the 64 allowed. */
const newRequestId = () => globalThis.crypto.randomUUID();

/**
 * Limiter asks a limitnode cluster for decisions and leases over its HTTP
 * API. One Limiter serves a whole process; it keeps no connection of its
 * own (fetch pools them) and remembers the node that answered last, to try
 * it first.
 */
export class Limiter {
  private readonly nodes: string[];
  private readonly timeoutMs: number;
  private readonly policy: FailurePolicy;
  private readonly token: string | undefined;
  private readonly fetch: typeof fetch;
  private readonly onRetry: ((event: RetryEvent) => void) | undefined;
  private readonly local: LocalLimiter;
  private preferred = 0;

  constructor(options: LimiterOptions) {
    if (options.nodes.length === 0) {
      throw new TypeError("limitnode: a Limiter needs at least one node address");
    }
    this.nodes = options.nodes.map(baseURL);
    this.timeoutMs = options.timeoutMs ?? 2000;
    this.policy = options.onFailure ?? "closed";
    this.token = options.token;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.onRetry = options.onRetry;
    this.local = new LocalLimiter(options.replicas ?? 1, options.maxLocalKeys ?? 100_000, options.clock ?? Date.now);
  }

  /**
   * allow asks for a decision. A denial is a Decision with `allowed` false
   * and status 429, not an error. A request the API refuses (4xx) throws a
   * LimitnodeError whatever the failure policy; when the cluster cannot
   * decide, the failure policy answers.
   */
  async allow(req: AllowRequest, options: CallOptions = {}): Promise<Decision> {
    const requestId = req.request_id ?? newRequestId();
    try {
      const a = await this.send("POST", "/v1/allow", { ...req, request_id: requestId }, { ...options, retryUnknown: true, requestId });
      if (a.status !== 200 && a.status !== 429) {
        throw LimitnodeError.fromBody(a.status, a.body);
      }
      return decisionOf(JSON.parse(a.body) as AllowResponse, a.status, canonicalHeaders(a.headers), requestId, a.attempts, a.headers.get("x-limitnode-leader") ?? undefined);
    } catch (error) {
      if (!(error instanceof UnavailableError) || this.policy === "throw") {
        throw error;
      }
      return this.fallback(req, requestId, error);
    }
  }

  /**
   * allowBatch decides up to 1,000 independent requests in one call and one
   * Raft entry. Each item of the answer is the request's Decision, or the
   * LimitnodeError that refused it alone (its `field` relative to the
   * request). When the cluster cannot decide, the failure policy answers
   * each request.
   */
  async allowBatch(reqs: AllowRequest[], options: CallOptions = {}): Promise<Array<Decision | LimitnodeError>> {
    const requests = reqs.map((r) => ({ ...r, request_id: r.request_id ?? newRequestId() }));
    try {
      const a = await this.send("POST", "/v1/allow/batch", { requests }, { ...options, retryUnknown: true, requestId: requests[0]?.request_id });
      if (a.status !== 200) {
        throw LimitnodeError.fromBody(a.status, a.body);
      }
      const { responses } = JSON.parse(a.body) as { responses: Array<BatchDecision | BatchError> };
      if (responses.length !== requests.length) {
        throw new UnavailableError(`limitnode: ${responses.length} answers to a batch of ${requests.length}`, { outcomeUnknown: true });
      }
      return responses.map((item, i) => batchItem(item, i, requests[i].request_id, a.attempts));
    } catch (error) {
      if (!(error instanceof UnavailableError) || this.policy === "throw") {
        throw error;
      }
      return requests.map((r) => {
        try {
          return this.fallback(r, r.request_id, error);
        } catch (refused) {
          return refused as LimitnodeError;
        }
      });
    }
  }

  /**
   * acquireLease asks for one of `max` concurrent slots of `key`. A refusal
   * (429) is a Lease with `granted` false. With `max_wait` the node holds
   * the call while the request waits in the queue: the call's timeout is
   * extended by it, and aborting the call takes the request out of the
   * queue. A call whose outcome is unknown throws an UnavailableError with
   * `outcomeUnknown` (a slot granted meanwhile expires at its TTL).
   */
  async acquireLease(req: LeaseRequest, options: CallOptions = {}): Promise<Lease> {
    const wait = req.max_wait === undefined ? 0 : (durationMs(req.max_wait) ?? 0);
    const timeoutMs = (options.timeoutMs ?? this.timeoutMs) + wait;
    const a = await this.send("POST", "/v1/leases", req, { ...options, timeoutMs, retryUnknown: false });
    if (a.status !== 200 && a.status !== 429) {
      throw LimitnodeError.fromBody(a.status, a.body);
    }
    const lease = JSON.parse(a.body) as LeaseGranted | LeaseDenied;
    return { ...lease, retryAfterSeconds: a.status === 429 ? retryAfterOf(a.headers) : 0 };
  }

  /**
   * renewLease moves the expiry of the held lease `id` to `ttl` (a Go
   * duration) from now. A lease no longer held throws a LimitnodeError with
   * status 404 and code not_found.
   */
  async renewLease(id: string, ttl: string, options: CallOptions = {}): Promise<LeaseGranted> {
    const a = await this.send("POST", `/v1/leases/${encodeURIComponent(id)}/renew`, { ttl }, { ...options, retryUnknown: true });
    if (a.status !== 200) {
      throw LimitnodeError.fromBody(a.status, a.body);
    }
    return JSON.parse(a.body) as LeaseGranted;
  }

  /**
   * releaseLease gives the lease `id` back, or takes a waiting request with
   * that ID out of its queue. A lease neither held nor waiting throws a
   * LimitnodeError with status 404, except after a retry: then the first
   * attempt, whose outcome was unknown, gave it back.
   */
  async releaseLease(id: string, options: CallOptions = {}): Promise<void> {
    const a = await this.send("DELETE", `/v1/leases/${encodeURIComponent(id)}`, undefined, { ...options, retryUnknown: true });
    if (a.status === 200 || (a.status === 404 && a.retriedUnknown)) {
      return;
    }
    throw LimitnodeError.fromBody(a.status, a.body);
  }

  /**
   * withLease runs `work` while holding a lease of `req`, and returns what
   * it returns. It acquires as acquireLease does (waiting in the queue when
   * `req` says so) and throws a LeaseRefusedError, without running `work`,
   * when no slot is granted. While `work` runs the lease is renewed for its
   * `ttl` every third of it; when a renewal finds the lease gone, `work`'s
   * signal is aborted with a LeaseLostError, which withLease then throws
   * (its cause is `work`'s own error, if any). When `work` settles the lease
   * is given back (within 5 s, even after the caller's signal ended).
   */
  async withLease<T>(req: LeaseRequest, work: (signal: AbortSignal) => Promise<T>, options: CallOptions = {}): Promise<T> {
    const lease = await this.acquireLease(req, options);
    if (!lease.granted) {
      throw new LeaseRefusedError(lease);
    }
    const workSignal = new AbortController();
    const stopRenewing = new AbortController();
    const onCallerAbort = () => workSignal.abort(options.signal?.reason);
    options.signal?.addEventListener("abort", onCallerAbort, { once: true });
    let lost: LeaseLostError | undefined;
    let renewal: Promise<void> | undefined;
    const renew = () => {
      renewal ??= this.renewLease(lease.id, req.ttl, { signal: stopRenewing.signal })
        .then(
          () => undefined,
          (error: unknown) => {
            if (isNotFound(error)) {
              lost = new LeaseLostError(`limitnode: lease ${lease.id} lost: a renewal found it gone`, { cause: error });
              workSignal.abort(lost);
            } // any other failure: the next tick tries again
          },
        )
        .finally(() => {
          renewal = undefined;
        });
    };
    const ticker = setInterval(renew, Math.max((durationMs(req.ttl) ?? 3) / 3, 1));
    let outcome: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await work(workSignal.signal) };
    } catch (error) {
      outcome = { ok: false, error };
    } finally {
      clearInterval(ticker);
      stopRenewing.abort();
      options.signal?.removeEventListener("abort", onCallerAbort);
      await renewal;
    }
    if (lost) {
      throw new LeaseLostError(lost.message, { cause: outcome.ok ? lost.cause : outcome.error });
    }
    try {
      await this.releaseLease(lease.id, { timeoutMs: leaseReleaseTimeoutMs });
    } catch (error) {
      if (!outcome.ok) throw outcome.error;
      if (isNotFound(error)) {
        throw new LeaseLostError(`limitnode: lease ${lease.id} lost: the release found it gone`, { cause: error });
      }
      throw error;
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  /** fallback is the failure policy's decision for req. */
  private fallback(req: AllowRequest, requestId: string, cause: UnavailableError): Decision {
    let answer: AllowResponse = { allowed: this.policy === "open", limit: 0, remaining: 0, reset_after_ms: 0, retry_after_ms: 0 };
    if (this.policy === "local") {
      answer = this.local.decide(req);
    }
    const headers: Record<string, string> = { "X-Limitnode-Degraded": "true" };
    if (answer.limit > 0) {
      headers["RateLimit-Limit"] = String(answer.limit);
      headers["RateLimit-Remaining"] = String(answer.remaining);
      headers["RateLimit-Reset"] = String(ceilSeconds(answer.reset_after_ms));
    }
    const decision = decisionOf(answer, answer.allowed ? 200 : 429, headers, requestId, 0, undefined);
    if (!answer.allowed) {
      decision.retryAfterSeconds = Math.max(ceilSeconds(answer.retry_after_ms), 1);
      headers["Retry-After"] = String(decision.retryAfterSeconds);
    }
    return { ...decision, degraded: true, cause };
  }

  /**
   * send makes one call of the API: it tries the nodes in turn, starting
   * with the one that answered last, until one answers or the timeout runs
   * out, and returns the answer whatever its status (a 503 only when the
   * call may not be retried). It throws an UnavailableError when no answer
   * can be had, and the caller's abort reason when the caller aborts.
   */
  private async send(method: string, path: string, payload: unknown, o: SendOptions): Promise<Answered> {
    const body = payload === undefined ? undefined : JSON.stringify(payload);
    const deadline = monotonicMs() + (o.timeoutMs ?? this.timeoutMs);
    const start = this.preferred;
    let refusedInARow = 0;
    let unknownInARow = 0;
    let retriedUnknown = false;
    let lastError: unknown;
    for (let attempt = 1; ; attempt++) {
      const index = (start + attempt - 1) % this.nodes.length;
      const node = this.nodes[index];
      const left = deadline - monotonicMs();
      if (left <= 0) {
        throw new UnavailableError(`limitnode: no answer within the timeout: ${describe(lastError)}`, { outcomeUnknown: retriedUnknown, cause: lastError });
      }
      const a = await exchange({ url: node + path, method, body, token: this.token, timeoutMs: left, signal: o.signal, fetch: this.fetch });
      if (o.signal?.aborted) {
        throw o.signal.reason;
      }
      let delayMs = 0;
      if (a.kind === "notSent") {
        lastError = a.error;
        if (++refusedInARow >= this.nodes.length) {
          throw new UnavailableError(`limitnode: no node reachable: ${describe(a.error)}`, { outcomeUnknown: retriedUnknown, cause: a.error });
        }
        continue;
      }
      refusedInARow = 0;
      if (a.kind === "unknown") {
        lastError = a.error;
        if (!o.retryUnknown || deadline - monotonicMs() <= 0) {
          throw new UnavailableError(`limitnode: the outcome is unknown: ${describe(a.error)}`, { outcomeUnknown: true, cause: a.error });
        }
        // The node that broke off may be gone: the next goes at once, and
        // only a run of failures backs off.
        delayMs = unknownInARow === 0 ? 0 : Math.min(50 * 2 ** (unknownInARow - 1), 500);
        unknownInARow++;
      } else {
        this.preferred = index;
        if (a.status !== 503 || !o.retryUnknown) {
          return { ...a, attempts: attempt, retriedUnknown };
        }
        lastError = LimitnodeError.fromBody(a.status, a.body);
        delayMs = retryAfterOf(a.headers) * 1000 || 1000;
        if (monotonicMs() + delayMs >= deadline) {
          throw lastError;
        }
      }
      retriedUnknown = true;
      this.onRetry?.({ node, attempt, requestId: o.requestId, reason: lastError, delayMs });
      await sleep(delayMs, o.signal);
    }
  }
}

/** decisionOf makes a Decision of an answer. */
function decisionOf(
  answer: AllowResponse,
  status: number,
  headers: Record<string, string>,
  requestId: string,
  attempts: number,
  leader: string | undefined,
): Decision {
  const retryAfter = Number.parseInt(headers["Retry-After"] ?? "", 10);
  return {
    ...answer,
    status: status === 200 ? 200 : 429,
    headers,
    retryAfterSeconds: answer.allowed || Number.isNaN(retryAfter) ? 0 : retryAfter,
    leader,
    requestId,
    attempts,
    degraded: false,
    cause: undefined,
  };
}

/**
 * batchItem reads one answer of a batch. A batch answers no per-request
 * headers, so a decision's are computed from its fields, as the cluster
 * computes its own (without the policy's name, which the item lacks).
 */
function batchItem(item: BatchDecision | BatchError, i: number, requestId: string, attempts: number): Decision | LimitnodeError {
  if (item.status !== 200 && item.status !== 429) {
    const e = item as BatchError;
    const field = e.field.replace(`requests[${i}]`, "").replace(/^\./, "") || undefined;
    const where = field ? ` (${field})` : "";
    return new LimitnodeError(`limitnode: ${e.status} ${e.code}${where}: ${e.error}`, e.status, e.code, field);
  }
  const { status, ...answer } = item as BatchDecision;
  const headers: Record<string, string> = {
    "RateLimit-Limit": String(answer.limit),
    "RateLimit-Remaining": String(answer.remaining),
    "RateLimit-Reset": String(ceilSeconds(answer.reset_after_ms)),
  };
  if (!answer.allowed) {
    headers["Retry-After"] = String(Math.max(ceilSeconds(answer.retry_after_ms), 1));
  }
  return decisionOf(answer, status, headers, requestId, attempts, undefined);
}

/** canonicalHeaders picks the rate-limit headers of an answer, under their canonical names. */
function canonicalHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of rateLimitHeaders) {
    const value = headers.get(name);
    if (value !== null) out[name] = value;
  }
  return out;
}

/** retryAfterOf is an answer's Retry-After in seconds, or 0. */
function retryAfterOf(headers: Headers): number {
  const seconds = Number.parseInt(headers.get("retry-after") ?? "", 10);
  return Number.isNaN(seconds) ? 0 : seconds;
}

function isNotFound(error: unknown): boolean {
  return error instanceof LimitnodeError && error.status === 404 && error.code === "not_found";
}

/** describe is an error's message with its cause's, for the errors send throws. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.message}${cause}`;
}
