// Limiter: the calls of the HTTP API against several nodes, with one retry
// rule and one failure policy.
//
// The retry rule. A request that provably never left (the connection could
// not be opened) goes to the next node at once. A request whose outcome is
// unknown (the node took it and did not answer in time, the connection
// broke after it was sent, or a node answered 503) is sent again when the
// cluster answers a repeat once, or when a repeat costs at most a unit: an
// allow with a request_id (the caller's, or one the Limiter gives a request
// with max_wait or settle) is answered with the first decision and charged
// once; a plain allow carries no request_id, so that nodes may answer its
// denials from deny leases and a busy service does not fill its token's
// memory of IDs, and its repeat may be charged once more when the first
// node did decide it (a lost unit, never an admission past the limit); a
// settlement names its reservation; renewing and releasing a lease, reads
// and puts are idempotent. A lease acquire, a share's give-back and a
// deletion are not retried after an unknown outcome. A decision or a read
// gives each attempt a third of the call (attemptTimeoutMs), so that a node
// that hangs costs that much, not the call. A 503 sends the request to the
// next node at once; once every node answered 503, its Retry-After is
// waited out before the next round, or the call gives up at once when the
// wait would outlast the timeout. Every retry stays within the call's
// timeout.

import * as admin from "./admin.js";
import { MalformedAnswer, parseJSON, readBatch, readDecision, readLease, readSettlement, readShareReturned, retryAfterSeconds } from "./answers.js";
import { durationMs } from "./duration.js";
import { canonicalHeaders, ceilSeconds, computedHeaders } from "./headers.js";
import { LeaseLostError, LeaseRefusedError, LimitnodeError, UnavailableError } from "./errors.js";
import { LocalLimiter } from "./local.js";
import { Reservation } from "./settle.js";
import { LocalShares } from "./shares.js";
import { baseURL, exchange, sleep } from "./transport.js";
import type {
  AllowRequest,
  AllowResponse,
  BatchDecision,
  BatchError,
  Block,
  BlockPage,
  KeyPage,
  KeyState,
  LeaseDenied,
  LeaseGranted,
  LeaseRequest,
  Policy,
  PolicyPage,
  PolicyRequest,
  Settlement,
  ShareReturn,
} from "./types.js";

/**
 * FailurePolicy says what `allow`, `allowBatch` and `wait` answer when the
 * cluster cannot decide (no node reachable, a 503 or 500, an answer that is
 * not one, the timeout): "closed" denies, "open" allows, "local" decides
 * with an in-process limiter that enforces this process's share of the
 * limit (requests naming a policy, which only the cluster knows, are
 * denied), and "throw" throws the UnavailableError. Such a decision is
 * marked `degraded`.
 */
export type FailurePolicy = "closed" | "open" | "local" | "throw";

/** LimiterOptions configures a Limiter. */
export interface LimiterOptions {
  /** Node addresses, "127.0.0.1:7070" or base URLs ("https://limits.internal:7070"); any node answers every call. */
  nodes: string[];
  /** The time one call may take, retries included, in ms. Default 2000. */
  timeoutMs?: number;
  /**
   * The time one attempt of a decision or a read may take when another
   * node could answer it, in ms: a node that takes the call and does not
   * answer costs this much, then the next node is tried. Default a third
   * of the call's timeout. A request with `hold` gets its wait on top.
   */
  attemptTimeoutMs?: number;
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
  /** This process's clock, in ms since the epoch: the local limiter's, and `resetAt`'s. Default Date.now. */
  clock?: () => number;
  /**
   * Answer hot keys in process, exactly: for a request of one check (a
   * policy's, or an inline limit with `local_shares`) without `request_id`,
   * `max_wait`, `hold` or `settle`, the Limiter takes a share of the key's
   * budget from the cluster once it saw the key twice within a share's TTL,
   * riding on a request it sends anyway (`take_share`), and admits the
   * key's next requests from it until it is spent or ends, asking for the
   * next one in the background before. The cluster charges each share as
   * if every unit were spent at its end, so what every client and node
   * admit together never exceeds the limit. Such a Decision has `shared`
   * set. `close()` gives back what is left. Default false.
   */
  localShares?: boolean;
}

/** RetryEvent describes a retry about to be made. */
export interface RetryEvent {
  /** The node whose attempt failed. */
  node: string;
  /** The attempt that failed, from 1. */
  attempt: number;
  /** The request_id the retry carries (allow's, allowBatch's first): undefined for a plain request, which carries none. */
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
  /** The Retry-After of a denial in seconds (jittered by the cluster, at most a day), else 0. */
  retryAfterSeconds: number;
  /** When the limit is fully available again, in ms since the epoch on this process's clock: the answer's arrival plus reset_after_ms. */
  resetAt: number;
  /** The ID of the leader that decided, when the node said. */
  leader: string | undefined;
  /**
   * The request_id the request was sent with: the caller's, or one of the
   * Limiter's own for a request with `max_wait` or `settle`; undefined for
   * a plain request, which is sent without one.
   */
  requestId: string | undefined;
  /** True for a denial a node answered from a deny lease, repeating one the leader made moments before (X-Limitnode-Leased). */
  leased: boolean;
  /**
   * True for an admission the Limiter answered from a share it holds
   * (localShares), without asking the cluster. Its `remaining` is what the
   * key had left for others when the share was granted plus what the
   * Limiter holds; its headers are computed from its fields.
   */
  shared: boolean;
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

/** How long the release that ends withLease may take, even after the caller's signal ended. */
const leaseReleaseTimeoutMs = 5000;

/** The most a node holds a request with `hold` (the server's MaxHoldWait), in ms. */
const maxHoldMs = 5000;

/** An answer that ended a call, with what the call went through to get it. */
export interface Answered {
  status: number;
  headers: Headers;
  body: string;
  attempts: number;
  /** True when an earlier attempt's outcome was unknown. */
  retriedUnknown: boolean;
}

/** How a call goes from node to node (see the retry rule at the top). */
export interface CallKind {
  /** The call may be sent again after an unknown outcome or a 503. */
  retryUnknown: boolean;
  /** Each attempt gets attemptTimeoutMs when another node could answer: decisions and reads. */
  bounded: boolean;
  /** How long a node may hold the answer on purpose (hold), added to each attempt and to the call. */
  heldMs?: number;
  requestId?: string;
}

/** Request is one call of the API whose answer, with a status in `ok`, `read` reads (and `finish` finishes, from the whole answer). */
export type Request = <T, U = T>(
  method: string,
  path: string,
  payload: unknown,
  kind: CallKind,
  ok: number[],
  read: (body: unknown, status: number) => T,
  options: CallOptions,
  finish?: (value: T, a: Answered) => U,
) => Promise<U>;

/** The kinds of call: a decision, a read, and others that may or may not be sent again. */
export const decisionCall: CallKind = { retryUnknown: true, bounded: true };
export const readCall: CallKind = { retryUnknown: true, bounded: true };
export const idempotentCall: CallKind = { retryUnknown: true, bounded: false };
export const onceCall: CallKind = { retryUnknown: false, bounded: false };

const monotonicMs = () => performance.now();

/** newRequestId names a request for the cluster's deduplication: 36 characters, within the 64 allowed. */
const newRequestId = () => globalThis.crypto.randomUUID();

/**
 * requestIdOf is the request_id to send req with: the caller's, or one of
 * the Limiter's own when req reserves (max_wait, settle), so that a retry
 * after an unknown outcome is charged once; such a request is decided
 * through the log anyway. A plain request gets none, so that a node may
 * answer its denial from a deny lease, and a busy service does not spend
 * its token's bounded memory of request IDs (a new ID past the bound is
 * refused with a 503).
 */
function requestIdOf(req: AllowRequest): string | undefined {
  if (req.request_id !== undefined) return req.request_id;
  return req.max_wait !== undefined || req.settle !== undefined ? newRequestId() : undefined;
}

/** goDuration spells ms as a Go duration, rounded down to the millisecond. */
const goDuration = (ms: number) => `${Math.max(0, Math.floor(ms))}ms`;

/**
 * Limiter asks a limitnode cluster for decisions, leases and settlements,
 * and manages its keys, blocks and policies, over its HTTP API. One Limiter
 * serves a whole process; it keeps no connection of its own (fetch pools
 * them) and remembers the node that answered last, to try it first.
 */
export class Limiter {
  private readonly nodes: string[];
  private readonly timeoutMs: number;
  private readonly attemptTimeoutMs: number | undefined;
  private readonly policy: FailurePolicy;
  private readonly token: string | undefined;
  private readonly fetch: typeof fetch;
  private readonly onRetry: ((event: RetryEvent) => void) | undefined;
  private readonly clock: () => number;
  private readonly local: LocalLimiter;
  private readonly shares: LocalShares | undefined;
  private preferred = 0;

  constructor(options: LimiterOptions) {
    if (options.nodes.length === 0) {
      throw new TypeError("limitnode: a Limiter needs at least one node address");
    }
    this.nodes = options.nodes.map(baseURL);
    this.timeoutMs = options.timeoutMs ?? 2000;
    this.attemptTimeoutMs = options.attemptTimeoutMs;
    this.policy = options.onFailure ?? "closed";
    this.token = options.token;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.onRetry = options.onRetry;
    this.clock = options.clock ?? Date.now;
    this.local = new LocalLimiter(options.replicas ?? 1, options.maxLocalKeys ?? 100_000, this.clock);
    if (options.localShares) {
      const giveBack = async (body: ShareReturn, o: CallOptions) => {
        await this.request("POST", "/v1/shares/return", body, onceCall, [200], (b) => readShareReturned(b, "answer"), o);
      };
      this.shares = new LocalShares({ decide: (req, o) => this.decide(req, o), giveBack }, this.timeoutMs, this.clock);
    }
  }

  /**
   * allow asks for a decision. A denial is a Decision with `allowed` false
   * and status 429, not an error. A request the API refuses (4xx) throws a
   * LimitnodeError whatever the failure policy; when the cluster cannot
   * decide, the failure policy answers.
   */
  async allow(req: AllowRequest, options: CallOptions = {}): Promise<Decision> {
    const shared = await this.shares?.allow(req, options);
    return shared ?? this.decide(req, options);
  }

  /**
   * close gives back, through the cluster, what the Limiter did not spend of
   * its shares (localShares), and takes no more; calls after it are sent as
   * without shares. It settles once no node answers a denial the units given
   * back would admit, or throws the first error of a give-back (the units of
   * a share not given back are lost until it ends, at most a second). A
   * Limiter without local shares has nothing to close.
   */
  async close(options: CallOptions = {}): Promise<void> {
    await this.shares?.close(options);
  }

  /** decide asks the cluster for req's decision: allow without local shares. */
  private async decide(req: AllowRequest, options: CallOptions): Promise<Decision> {
    const requestId = requestIdOf(req);
    try {
      const kind = { ...decisionCall, requestId, heldMs: heldMs(req) };
      const a = await this.send("POST", "/v1/allow", { ...req, request_id: requestId }, kind, options);
      if (a.status !== 200 && a.status !== 429) {
        throw LimitnodeError.fromBody(a.status, a.body);
      }
      const answer = readAnswer(a, (body) => readDecision(body, a.status));
      const decision = this.decisionOf(answer, a.status, canonicalHeaders(a.headers), requestId, a.attempts, a.headers.get("x-limitnode-leader") ?? undefined);
      decision.leased = a.headers.get("x-limitnode-leased") === "true";
      return decision;
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
    const requests = reqs.map((r) => ({ ...r, request_id: requestIdOf(r) }));
    try {
      const a = await this.send("POST", "/v1/allow/batch", { requests }, { ...decisionCall, requestId: requests[0]?.request_id }, options);
      if (a.status !== 200) {
        throw LimitnodeError.fromBody(a.status, a.body);
      }
      const responses = readAnswer(a, (body) => readBatch(body, requests.length));
      return responses.map((item, i) => this.batchItem(item, i, requests[i].request_id, a.attempts));
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
   * wait asks for `req` with `max_wait` (maxWaitMs, rounded down to the
   * millisecond) and, when it is admitted by reservation, sleeps the
   * reservation's `wait_ms` before it returns, as Upstash's blockUntilReady
   * and x/time/rate's Wait do: an answer with `allowed` true may go on at
   * once. A request further than maxWaitMs away is denied at once. Token
   * bucket, leaky bucket and GCRA only (another algorithm is a 400). An
   * abort during the sleep is thrown; the reservation stays consumed.
   */
  async wait(req: AllowRequest, maxWaitMs: number, options: CallOptions = {}): Promise<Decision> {
    const d = await this.allow({ ...req, max_wait: goDuration(maxWaitMs) }, options);
    if (!d.allowed || !d.wait_ms) {
      return d;
    }
    await sleep(d.wait_ms, options.signal);
    return { ...d, wait_ms: 0 };
  }

  /**
   * reserve asks for `req` as a reservation of its cost, the most the work
   * may cost, to settle within `ttl` (a Go duration, 1s to 1h) with what
   * it used. An admission answers a Reservation to settle when the work is
   * done; a denial, or a decision of the failure policy, one with nothing
   * to settle. Every check reserves the same cost; not with `max_wait`.
   */
  async reserve(req: AllowRequest, ttl: string, options: CallOptions = {}): Promise<Reservation> {
    return new Reservation(await this.allow({ ...req, settle: { ttl } }, options), this);
  }

  /**
   * settle settles the reservation `settlementId` (a decision's
   * `settlement_id`) with `cost`, what the request used: what it did not
   * use goes back, what it used beyond is charged (up to the policy's
   * `max_debt`). While the outcome is unknown or the cluster answers 503,
   * it asks again with the same cost within the timeout: a settlement made
   * twice is answered once (`duplicate`) and charged once. Another cost is
   * a 409 LimitnodeError; an unknown or ended reservation a 404.
   */
  async settle(settlementId: string, cost: number, options: CallOptions = {}): Promise<Settlement> {
    return this.request("POST", "/v1/settle", { settlement_id: settlementId, cost }, idempotentCall, [200], (body) => readSettlement(body, "answer"), options);
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
    return this.request("POST", "/v1/leases", req, onceCall, [200, 429], readLease, { ...options, timeoutMs }, (lease, a) => ({
      ...lease,
      retryAfterSeconds: a.status === 429 ? (retryAfterSeconds(a.headers.get("retry-after")) ?? 0) : 0,
    }));
  }

  /**
   * renewLease moves the expiry of the held lease `id` to `ttl` (a Go
   * duration) from now. A lease no longer held throws a LimitnodeError with
   * status 404 and code not_found.
   */
  async renewLease(id: string, ttl: string, options: CallOptions = {}): Promise<LeaseGranted> {
    return this.request("POST", `/v1/leases/${encodeURIComponent(id)}/renew`, { ttl }, idempotentCall, [200], (body, status) => readLease(body, status) as LeaseGranted, options);
  }

  /**
   * releaseLease gives the lease `id` back, or takes a waiting request with
   * that ID out of its queue. A lease neither held nor waiting throws a
   * LimitnodeError with status 404, except after a retry: then the first
   * attempt, whose outcome was unknown, gave it back.
   */
  async releaseLease(id: string, options: CallOptions = {}): Promise<void> {
    const a = await this.send("DELETE", `/v1/leases/${encodeURIComponent(id)}`, undefined, idempotentCall, options);
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

  /** getKey returns what the cluster holds of `key` under each limit, consuming nothing; a 404 LimitnodeError when it holds nothing. */
  getKey(key: string, options: CallOptions = {}): Promise<KeyState> {
    return admin.getKey(this.request, key, options);
  }

  /** listKeys returns a page of the live keys (sorted) that start with `prefix` and sort after `after`, up to `limit` (1 to 1,000, default 100), with their state. */
  listKeys(page: admin.KeyListing = {}, options: CallOptions = {}): Promise<KeyPage> {
    return admin.listKeys(this.request, page, options);
  }

  /** resetKey deletes `key`'s state under every limit, on every node (role admin), and returns how many limits it held state under; a 404 LimitnodeError when it held none. */
  resetKey(key: string, options: CallOptions = {}): Promise<number> {
    return admin.resetKey(this.request, key, options);
  }

  /** putBlock blocks `key` for `ttl` (a Go duration, 1s to 8784h) of cluster time, on every node and path, telling callers `reason` (role admin). A block the key had is replaced. */
  putBlock(key: string, ttl: string, reason = "", options: CallOptions = {}): Promise<Block> {
    return admin.putBlock(this.request, key, ttl, reason, options);
  }

  /** deleteBlock lifts `key`'s block and returns it as it was (role admin); a 404 LimitnodeError when the key is not blocked. */
  deleteBlock(key: string, options: CallOptions = {}): Promise<Block> {
    return admin.deleteBlock(this.request, key, options);
  }

  /** listBlocks returns a page of the blocked keys, sorted, after `after`, up to `limit` (1 to 1,000, default 100). */
  listBlocks(page: admin.Listing = {}, options: CallOptions = {}): Promise<BlockPage> {
    return admin.listBlocks(this.request, page, options);
  }

  /** putPolicy creates or replaces the policy `name` (role admin) and returns it as stored. */
  putPolicy(name: string, policy: PolicyRequest, options: CallOptions = {}): Promise<Policy> {
    return admin.putPolicy(this.request, name, policy, options);
  }

  /** getPolicy returns the policy `name` as the node has applied it, with its `version` and `shadow_denied`; a 404 LimitnodeError when there is none. */
  getPolicy(name: string, options: CallOptions = {}): Promise<Policy> {
    return admin.getPolicy(this.request, name, options);
  }

  /** listPolicies returns a page of the policies, sorted by name, after `after`, up to `limit`. */
  listPolicies(page: admin.Listing = {}, options: CallOptions = {}): Promise<PolicyPage> {
    return admin.listPolicies(this.request, page, options);
  }

  /** deletePolicy deletes the policy `name` (role admin); a 404 LimitnodeError when there is none. */
  deletePolicy(name: string, options: CallOptions = {}): Promise<void> {
    return admin.deletePolicy(this.request, name, options);
  }

  /**
   * request makes one call that is not a decision: its answer, with a
   * status in `ok`, read by `read` (and `finish`, which sees the whole
   * answer); a 4xx is a LimitnodeError, any other status, an answer that is
   * not one, or no answer an UnavailableError.
   */
  private readonly request: Request = async <T, U = T>(
    method: string,
    path: string,
    payload: unknown,
    kind: CallKind,
    ok: number[],
    read: (body: unknown, status: number) => T,
    options: CallOptions,
    finish?: (value: T, a: Answered) => U,
  ): Promise<U> => {
    const a = await this.send(method, path, payload, kind, options);
    if (!ok.includes(a.status)) {
      throw LimitnodeError.fromBody(a.status, a.body);
    }
    const value = readAnswer(a, (body) => read(body, a.status));
    return finish ? finish(value, a) : (value as unknown as U);
  };

  /** decisionOf makes a Decision of an answer that arrived now. */
  private decisionOf(
    answer: AllowResponse,
    status: number,
    headers: Record<string, string>,
    requestId: string | undefined,
    attempts: number,
    leader: string | undefined,
  ): Decision {
    return {
      ...answer,
      status: status === 200 ? 200 : 429,
      headers,
      retryAfterSeconds: answer.allowed ? 0 : (retryAfterSeconds(headers["Retry-After"] ?? null) ?? 0),
      resetAt: this.clock() + answer.reset_after_ms,
      leader,
      requestId,
      leased: false,
      shared: false,
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
  private batchItem(item: BatchDecision | BatchError, i: number, requestId: string | undefined, attempts: number): Decision | LimitnodeError {
    if (item.status !== 200 && item.status !== 429) {
      const e = item as BatchError;
      const field = (e.field ?? "").replace(`requests[${i}]`, "").replace(/^\./, "") || undefined;
      const where = field ? ` (${field})` : "";
      return new LimitnodeError(`limitnode: ${e.status} ${e.code}${where}: ${e.error}`, e.status, e.code, field);
    }
    const { status, ...answer } = item as BatchDecision;
    return this.decisionOf(answer, status, computedHeaders(answer), requestId, attempts, undefined);
  }

  /** fallback is the failure policy's decision for req. */
  private fallback(req: AllowRequest, requestId: string | undefined, cause: UnavailableError): Decision {
    let answer: AllowResponse = { allowed: this.policy === "open", limit: 0, remaining: 0, reset_after_ms: 0, retry_after_ms: 0 };
    if (this.policy === "local") {
      answer = this.local.decide(req);
    }
    const headers: Record<string, string> = { "X-Limitnode-Degraded": "true" };
    if (answer.limit > 0) {
      Object.assign(headers, computedHeaders(answer));
    } else if (!answer.allowed) {
      headers["Retry-After"] = "1";
    }
    const decision = this.decisionOf(answer, answer.allowed ? 200 : 429, headers, requestId, 0, undefined);
    decision.retryAfterSeconds = answer.allowed ? 0 : Math.max(ceilSeconds(answer.retry_after_ms), 1);
    return { ...decision, degraded: true, cause };
  }

  /**
   * send makes one call of the API as the retry rule at the top says: it
   * tries the nodes in turn, starting with the one that answered last,
   * until one answers or the timeout runs out, and returns the answer
   * whatever its status (a 503 only when the call may not be retried). It
   * throws an UnavailableError when no answer can be had, or the answer is
   * malformed, and the caller's abort reason when the caller aborts.
   */
  private async send(method: string, path: string, payload: unknown, kind: CallKind, o: CallOptions): Promise<Answered> {
    const body = payload === undefined ? undefined : JSON.stringify(payload);
    const heldMs = kind.heldMs ?? 0;
    const timeoutMs = (o.timeoutMs ?? this.timeoutMs) + heldMs;
    const deadline = monotonicMs() + timeoutMs;
    const perAttemptMs =
      kind.retryUnknown && kind.bounded && this.nodes.length > 1 ? (this.attemptTimeoutMs ?? (o.timeoutMs ?? this.timeoutMs) / 3) + heldMs : Infinity;
    const start = this.preferred;
    let refusedInARow = 0;
    let unknownInARow = 0;
    let unavailableInARow = 0;
    let retriedUnknown = false;
    let lastError: unknown;
    for (let attempt = 1; ; attempt++) {
      const index = (start + attempt - 1) % this.nodes.length;
      const node = this.nodes[index];
      const left = deadline - monotonicMs();
      if (left <= 0) {
        throw new UnavailableError(`limitnode: no answer within the timeout: ${describe(lastError)}`, { outcomeUnknown: retriedUnknown, cause: lastError });
      }
      const a = await exchange({ url: node + path, method, body, token: this.token, timeoutMs: Math.min(left, perAttemptMs), signal: o.signal, fetch: this.fetch });
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
      if (a.kind === "malformed") {
        throw new UnavailableError(`${a.error.message} (from ${node})`, { outcomeUnknown: true, cause: a.error });
      }
      if (a.kind === "unknown") {
        lastError = a.error;
        if (!kind.retryUnknown || deadline - monotonicMs() <= 0) {
          throw new UnavailableError(`limitnode: the outcome is unknown: ${describe(a.error)}`, { outcomeUnknown: true, cause: a.error });
        }
        // The node that broke off may be gone: the next goes at once, and
        // only a run of failures backs off.
        delayMs = unknownInARow === 0 ? 0 : Math.min(50 * 2 ** (unknownInARow - 1), 500);
        unknownInARow++;
      } else {
        if (a.status !== 503 || !kind.retryUnknown) {
          this.preferred = index;
          return { ...a, attempts: attempt, retriedUnknown };
        }
        lastError = LimitnodeError.fromBody(a.status, a.body);
        // Another node may decide: it is asked at once. Once every node
        // answered 503, the Retry-After is waited out.
        if (++unavailableInARow >= this.nodes.length) {
          unavailableInARow = 0;
          delayMs = (retryAfterSeconds(a.headers.get("retry-after")) || 1) * 1000;
          if (monotonicMs() + delayMs >= deadline) {
            throw lastError;
          }
        }
      }
      retriedUnknown = true;
      this.onRetry?.({ node, attempt, requestId: kind.requestId, reason: lastError, delayMs });
      await sleep(delayMs, o.signal);
    }
  }
}

/** readAnswer parses an answer's body and reads it, or throws an UnavailableError for an answer that is not one. */
function readAnswer<T>(a: Answered, read: (body: unknown) => T): T {
  try {
    return read(parseJSON(a.body));
  } catch (error) {
    if (error instanceof MalformedAnswer) {
      throw new UnavailableError(error.message, { outcomeUnknown: true, cause: error });
    }
    throw error;
  }
}

/** heldMs is how long a node may hold req on purpose: with `hold`, its `max_wait`, up to the node's bound. */
function heldMs(req: AllowRequest): number {
  if (!req.hold || req.max_wait === undefined) return 0;
  return Math.min(durationMs(req.max_wait) ?? 0, maxHoldMs);
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
