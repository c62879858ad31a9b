// Local shares in the Limiter (LimiterOptions.localShares): the Limiter
// takes a share of a hot key's budget from the cluster, riding on a request
// it sends anyway (take_share), and answers the key's next requests from it
// in process, asking for the next share in the background before it runs
// out. The cluster charges a share as if every unit were spent at its end,
// so what every client and node admit together never exceeds the limit; the
// Limiter stops spending a share spend_for_ms after it sent the request
// that brought it, on its monotonic clock (performance.now). What it
// retires unspent (a newer share of its key arrived, or it nears its end)
// it gives back in the background; close() gives back the rest. Which keys,
// how much and when is sharetable.ts's.

import type { CallOptions, Decision } from "./client.js";
import { durationMs } from "./duration.js";
import { computedHeaders } from "./headers.js";
import { ShareTable, type ShareReturn } from "./sharetable.js";
import type { AllowRequest, AllowResponse, ShareReturn as ShareReturnBody } from "./types.js";

/** The TTL the Limiter asks its shares for when the request's limit does not say (a policy's own local_shares bound it on the cluster), in ms. */
export const defaultShareTtlMs = 500;

/** The most the Limiter asks for at once; the cluster grants at most half of what a key has left, within the policy's max_units. */
const mostUnits = 1_000_000_000;

/** What names a key to the cluster when a share of it is given back: the request's check, without its cost. */
type KeyName = Pick<AllowRequest, "key" | "limit" | "policy" | "dimensions">;

/** The calls local shares make through the Limiter. */
export interface ShareCalls {
  /** decide sends one allow and answers its Decision (the failure policy's, when the cluster cannot decide). */
  decide(req: AllowRequest, options: CallOptions): Promise<Decision>;
  /** giveBack posts one return to /v1/shares/return. */
  giveBack(body: ShareReturnBody, options: CallOptions): Promise<void>;
}

/** A request that may be answered from a share: its key's name in the table, and the shares' TTL. */
interface Shareable {
  name: string;
  ttlMs: number;
}

/**
 * shareable says whether req may be answered from a share, with its key's
 * name and the shares' TTL: one check (a policy's, or an inline limit with
 * local_shares), no request_id, max_wait, hold, settle or take_share of the
 * caller's own.
 */
function shareable(req: AllowRequest): Shareable | undefined {
  if (req.checks !== undefined || req.request_id !== undefined || req.max_wait !== undefined || req.hold || req.settle !== undefined || req.take_share !== undefined) {
    return undefined;
  }
  let ttlMs = defaultShareTtlMs;
  if (req.limit === undefined) {
    if (req.policy === undefined) return undefined;
  } else if (req.limit.local_shares !== undefined) {
    const given = req.limit.local_shares.ttl === undefined ? undefined : durationMs(req.limit.local_shares.ttl);
    if (given !== undefined && given > 0) ttlMs = given;
  } else {
    return undefined;
  }
  const l = req.limit;
  const limit = l === undefined ? "" : `${l.algorithm ?? ""}/${l.rate}/${l.period ?? ""}/${l.burst ?? 0}`;
  const dims = Object.entries(req.dimensions ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .sort();
  return { name: [req.policy ?? "", req.key ?? "", limit, ...dims].join("\0"), ttlMs };
}

/** LocalShares is a Limiter's shares: by the request's key, answering from the decision that brought the share. */
export class LocalShares {
  private readonly table: ShareTable<KeyName, AllowResponse>;
  /** The renewals and give-backs under way in the background, for close to wait for. */
  private readonly renewing = new Set<Promise<unknown>>();
  private readonly givingBack = new Set<Promise<unknown>>();

  constructor(
    private readonly calls: ShareCalls,
    private readonly timeoutMs: number,
    /** The Limiter's clock, for resetAt. */
    private readonly clock: () => number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.table = new ShareTable<KeyName, AllowResponse>(now);
    this.table.giveBack = (returns) => {
      // A share not given back is lost until it ends, never over-admitted.
      const done = this.giveBack(returns, true, {}).finally(() => this.givingBack.delete(done));
      this.givingBack.add(done);
    };
  }

  /**
   * allow decides req from a share when it can, or sends it, asking for a
   * share when the key is hot; undefined when req is not for shares (the
   * Limiter sends it as it is). Waiting for another request's ask counts
   * against the call's timeout.
   */
  async allow(req: AllowRequest, options: CallOptions): Promise<Decision | undefined> {
    const key = shareable(req);
    if (key === undefined) {
      return undefined;
    }
    const started = this.now();
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const { key: k, limit, policy, dimensions } = req;
    const taken = await this.table.take({ name: key.name, id: { key: k, limit, policy, dimensions }, ttlMs: key.ttlMs, most: mostUnits, cost: req.cost ?? 1 }, timeoutMs, options.signal);
    if (taken.renew > 0) {
      // A renewal that fails brings no share: a later request asks again.
      const done = this.ask(key, { ...req, cost: 0 }, taken.renew, {})
        .catch(() => {})
        .finally(() => this.renewing.delete(done));
      this.renewing.add(done);
    }
    if (taken.answered && taken.template !== undefined) {
      return this.sharedDecision(taken.template, taken.sinceMs, taken.left);
    }
    const rest = { ...options, timeoutMs: Math.max(timeoutMs - (this.now() - started), 1) };
    return taken.ask > 0 ? this.ask(key, req, taken.ask, rest) : this.calls.decide(req, rest);
  }

  /** ask sends req with a share ask of units, settles the key with its answer, and answers req's decision. */
  private async ask(key: Shareable, req: AllowRequest, units: number, options: CallOptions): Promise<Decision> {
    const sentAt = this.now();
    let d: Decision | undefined;
    try {
      d = await this.calls.decide({ ...req, take_share: { units, ttl: `${Math.floor(key.ttlMs)}ms` } }, options);
      const { share, ...decision } = d; // the share is the Limiter's, never the caller's
      return decision;
    } finally {
      const s = d?.share;
      this.table.settle(
        key.name,
        sentAt,
        s === undefined || d === undefined ? undefined : { grant: { token: s.id, units: s.units, spendForMs: s.spend_for_ms }, template: { ...d, remaining: s.remaining } },
      );
    }
  }

  /**
   * sharedDecision is the admission a share gives sinceMs after its
   * grant's request was sent: the grant's decision, what is left counted as
   * what the key had left for others when the share was granted plus what
   * this Limiter holds (left), its reset shorter by sinceMs.
   */
  private sharedDecision(grant: AllowResponse, sinceMs: number, left: number): Decision {
    const answer: AllowResponse = {
      allowed: true,
      limit: grant.limit,
      remaining: Math.min(grant.remaining + left, grant.limit),
      reset_after_ms: Math.max(grant.reset_after_ms - Math.floor(sinceMs), 0),
      retry_after_ms: 0,
    };
    return {
      ...answer,
      status: 200,
      headers: computedHeaders(answer),
      retryAfterSeconds: 0,
      resetAt: this.clock() + answer.reset_after_ms,
      leader: undefined,
      requestId: undefined,
      leased: false,
      shared: true,
      attempts: 0,
      degraded: false,
      cause: undefined,
    };
  }

  /**
   * giveBack gives back the units of returns, all at once, in the
   * background (no one waits: the cluster answers without waiting out its
   * deny leases) or not, and answers the errors.
   */
  private async giveBack(returns: Array<ShareReturn<KeyName>>, background: boolean, options: CallOptions): Promise<unknown[]> {
    const done = await Promise.allSettled(
      returns.map((r) => this.calls.giveBack({ ...r.key, id: r.token, unspent: r.unspent, ...(background ? { background } : {}) }, options)),
    );
    return done.flatMap((d) => (d.status === "rejected" ? [d.reason] : []));
  }

  /**
   * close gives back what is left of the shares and takes no more; it
   * settles once the renewals and give-backs under way in the background
   * are done and no node answers a denial the units it gives back would
   * admit, and throws the first error of its give-backs (the units of a
   * share not given back are lost until it ends).
   */
  async close(options: CallOptions): Promise<void> {
    const returns = this.table.close();
    await Promise.all(this.renewing); // a share a renewal brings now is given back whole, in the background
    const [first] = await this.giveBack(returns, false, options);
    await Promise.all(this.givingBack);
    if (first !== undefined) {
      throw first;
    }
  }
}
