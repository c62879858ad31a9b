// The local fallback (onFailure: "local"): while the cluster cannot decide,
// each process decides alone, with the cluster's own algorithms on its own
// clock, for its share of each limit (rate and burst divided by the number
// of replicas), so that the replicas together stay close to the limit.
//
// The arithmetic is the cluster's (package algorithms), on exact integers:
// a bucket keeps its theoretical arrival time (TAT) scaled by the rate, so
// that "one unit takes period/rate ns" is the integer `period`; the windows
// keep counts, the log its timestamps. The three bucket algorithms decide
// identically, so one rule serves them.

import { parseDuration } from "./duration.js";
import { LimitnodeError } from "./errors.js";
import type { AllowRequest, AllowResponse, Check, Limit } from "./types.js";

type Algorithm = NonNullable<Limit["algorithm"]>;

const buckets: ReadonlySet<Algorithm> = new Set(["token_bucket", "leaky_bucket", "gcra", ""]);
const windows: ReadonlySet<Algorithm> = new Set(["fixed_window", "sliding_window_log", "sliding_window_counter"]);

// The cluster's bounds (README "Configuration"; package algorithms).
const maxRate = 1_000_000_000n;
const maxLogRate = 10_000n;
const minPeriod = 1_000_000n;
const maxPeriod = 8760n * 3_600_000_000_000n;
const maxFill = 50n * maxPeriod;
const maxKeyBytes = 512;
const maxChecks = 32;

/** A limit in nanoseconds, with its defaults filled in. */
interface ExactLimit {
  algorithm: Algorithm;
  rate: bigint;
  period: bigint;
  burst: bigint; // 0 for the windows
}

/** A key's state; its fields mean what package algorithms' State's do. */
interface State {
  tat: bigint; // buckets: TAT × rate
  start: bigint; // windows: the current window's start
  count: bigint;
  previous: bigint;
  log: bigint[];
}

const noState: State = { tat: 0n, start: 0n, count: 0n, previous: 0n, log: [] };

/** What one check decides, in nanoseconds. */
interface CheckDecision {
  allowed: boolean;
  limit: bigint;
  remaining: bigint;
  resetAfter: bigint;
  retryAfter: bigint;
  next: State;
}

const isBucket = (l: ExactLimit) => buckets.has(l.algorithm);
const capacity = (l: ExactLimit) => (isBucket(l) ? l.burst : l.rate);
const ceilDiv = (a: bigint, b: bigint) => (a <= 0n ? 0n : (a - 1n) / b + 1n);
const max = (a: bigint, b: bigint) => (a > b ? a : b);
const msOf = (nanos: bigint) => Number(ceilDiv(nanos, 1_000_000n));

// bucket is the token bucket (and so the leaky bucket and GCRA): with
// debt = max(TAT − now, 0), a cost fits while debt + cost×T ≤ burst×T.
const bucket = {
  debt: (l: ExactLimit, s: State, now: bigint) => max(s.tat - now * l.rate, 0n),
  wait(l: ExactLimit, s: State, now: bigint, cost: bigint): bigint {
    const over = bucket.debt(l, s, now) + cost * l.period - l.burst * l.period;
    return over <= 0n ? 0n : ceilDiv(over, l.rate);
  },
  admit: (l: ExactLimit, s: State, now: bigint, cost: bigint): State => ({
    ...noState,
    tat: max(s.tat, now * l.rate) + cost * l.period,
  }),
  remaining: (l: ExactLimit, s: State, now: bigint) => max(l.burst * l.period - bucket.debt(l, s, now), 0n) / l.period,
  expiresAt: (l: ExactLimit, s: State) => ceilDiv(s.tat, l.rate),
};

const windowStart = (now: bigint, period: bigint) => now - (((now % period) + period) % period);

// fixedWindow admits while the window's count + cost ≤ rate.
const fixedWindow = {
  count: (l: ExactLimit, s: State, now: bigint) => (s.start === windowStart(now, l.period) ? s.count : 0n),
  wait(l: ExactLimit, s: State, now: bigint, cost: bigint): bigint {
    const start = windowStart(now, l.period);
    return fixedWindow.count(l, s, now) + cost <= l.rate ? 0n : start + l.period - now;
  },
  admit: (l: ExactLimit, s: State, now: bigint, cost: bigint): State => ({
    ...noState,
    start: windowStart(now, l.period),
    count: fixedWindow.count(l, s, now) + cost,
  }),
  remaining: (l: ExactLimit, s: State, now: bigint) => l.rate - fixedWindow.count(l, s, now),
  expiresAt: (l: ExactLimit, s: State) => (s.count === 0n ? 0n : s.start + l.period),
};

// slidingCounter admits while previous×(period − elapsed)/period + current + cost ≤ rate.
const slidingCounter = {
  counts(l: ExactLimit, s: State, now: bigint): [bigint, bigint, bigint] {
    const start = windowStart(now, l.period);
    if (s.start === start) return [start, s.previous, s.count];
    if (s.start === start - l.period) return [start, s.count, 0n];
    return [start, 0n, 0n];
  },
  // elapsedToFit is the least elapsed e with previous×(period − e) ≤ room×period.
  elapsedToFit: (period: bigint, previous: bigint, room: bigint) =>
    room >= previous ? 0n : ceilDiv((previous - room) * period, previous),
  wait(l: ExactLimit, s: State, now: bigint, cost: bigint): bigint {
    const [start, previous, current] = slidingCounter.counts(l, s, now);
    const elapsed = now - start;
    if (previous * (l.period - elapsed) + (current + cost) * l.period <= l.rate * l.period) return 0n;
    const room = l.rate - current - cost;
    if (room >= 0n && previous > 0n) {
      const e = slidingCounter.elapsedToFit(l.period, previous, room);
      if (e < l.period) return start + e - now;
    }
    const next = start + l.period;
    return current === 0n ? next - now : next + slidingCounter.elapsedToFit(l.period, current, l.rate - cost) - now;
  },
  admit(l: ExactLimit, s: State, now: bigint, cost: bigint): State {
    const [start, previous, current] = slidingCounter.counts(l, s, now);
    return { ...noState, start, previous, count: current + cost };
  },
  remaining(l: ExactLimit, s: State, now: bigint): bigint {
    const [start, previous, current] = slidingCounter.counts(l, s, now);
    return max(l.rate - current - ceilDiv(previous * (l.period - (now - start)), l.period), 0n);
  },
  expiresAt(l: ExactLimit, s: State): bigint {
    if (s.count > 0n) return s.start + 2n * l.period;
    return s.previous > 0n ? s.start + l.period : 0n;
  },
};

// slidingLog keeps one timestamp per admitted unit and admits while those
// of the last period number at most rate − cost.
const slidingLog = {
  live: (l: ExactLimit, s: State, now: bigint) => s.log.filter((t) => t > now - l.period),
  wait(l: ExactLimit, s: State, now: bigint, cost: bigint): bigint {
    const live = slidingLog.live(l, s, now);
    const over = BigInt(live.length) + cost - l.rate;
    return over <= 0n ? 0n : live[Number(over) - 1] + l.period - now;
  },
  admit: (l: ExactLimit, s: State, now: bigint, cost: bigint): State => ({
    ...noState,
    log: [...slidingLog.live(l, s, now), ...Array<bigint>(Number(cost)).fill(now)],
  }),
  remaining: (l: ExactLimit, s: State, now: bigint) => l.rate - BigInt(slidingLog.live(l, s, now).length),
  expiresAt: (l: ExactLimit, s: State) => (s.log.length === 0 ? 0n : s.log[s.log.length - 1] + l.period),
};

function ruleOf(l: ExactLimit) {
  switch (l.algorithm) {
    case "fixed_window":
      return fixedWindow;
    case "sliding_window_counter":
      return slidingCounter;
    case "sliding_window_log":
      return slidingLog;
    default:
      return bucket;
  }
}

/** decide is package algorithms' Decide: a denial leaves the state as it was. */
function decide(l: ExactLimit, s: State, now: bigint, cost: bigint): CheckDecision {
  const rule = ruleOf(l);
  const wait = rule.wait(l, s, now, cost);
  const next = wait === 0n && cost > 0n ? rule.admit(l, s, now, cost) : s;
  return {
    allowed: wait === 0n,
    limit: capacity(l),
    remaining: rule.remaining(l, next, now),
    resetAfter: max(rule.expiresAt(l, next) - now, 0n),
    retryAfter: wait,
    next,
  };
}

function invalid(field: string, message: string): LimitnodeError {
  return new LimitnodeError(`limitnode: 400 invalid_argument (${field}): ${message}`, 400, "invalid_argument", field);
}

/** exactLimit reads a limit as the cluster does, or throws the 400 it would answer. */
function exactLimit(limit: Limit, field: string): ExactLimit {
  const algorithm: Algorithm = limit.algorithm ?? "";
  if (!buckets.has(algorithm) && !windows.has(algorithm)) {
    throw invalid(`${field}.algorithm`, `unknown algorithm ${JSON.stringify(algorithm)}`);
  }
  if (!Number.isSafeInteger(limit.rate) || BigInt(limit.rate) < 1n || BigInt(limit.rate) > maxRate) {
    throw invalid(`${field}.rate`, `rate must be an integer from 1 to ${maxRate}`);
  }
  const rate = BigInt(limit.rate);
  const period = limit.period === undefined ? 1_000_000_000n : parseDuration(limit.period);
  if (period === undefined || period < minPeriod || period > maxPeriod) {
    throw invalid(`${field}.period`, "period must be a Go duration from 1ms to 8760h0m0s");
  }
  if (algorithm === "sliding_window_log" && rate > maxLogRate) {
    throw invalid(`${field}.rate`, `sliding_window_log takes a rate of at most ${maxLogRate}`);
  }
  if (windows.has(algorithm)) {
    if (limit.burst !== undefined) {
      throw invalid(`${field}.burst`, "burst applies to token_bucket, leaky_bucket and gcra");
    }
    return { algorithm, rate, period, burst: 0n };
  }
  const burst = limit.burst === undefined ? rate : BigInt(limit.burst);
  if (burst < 1n || burst > maxRate) {
    throw invalid(`${field}.burst`, `burst must be an integer from 1 to ${maxRate}`);
  }
  if ((burst * period) / rate > maxFill) {
    throw invalid(`${field}.burst`, "burst / rate × period (the time to refill an empty bucket) must be at most 50 years");
  }
  return { algorithm: algorithm || "token_bucket", rate, period, burst };
}

/** shareOf divides a limit among replicas, at least one unit each. */
function shareOf(l: ExactLimit, replicas: bigint): ExactLimit {
  const share = (v: bigint) => max(v / replicas, 1n);
  return { ...l, rate: share(l.rate), burst: isBucket(l) ? share(l.burst) : 0n };
}

/** fits reports whether a shared limit is still one the cluster could decide. */
function fits(l: ExactLimit): boolean {
  return !isBucket(l) || (l.burst * l.period) / l.rate <= maxFill;
}

/** The checks of a request, as the multi-check form spells them. */
function checksOf(req: AllowRequest): { checks: Check[]; prefix: (i: number) => string } {
  if (req.checks !== undefined) {
    return { checks: req.checks, prefix: (i) => `checks[${i}]` };
  }
  const { key, limit, policy, dimensions, cost } = req;
  return { checks: [{ key, limit, policy, dimensions, cost }], prefix: () => "" };
}

const at = (prefix: string, field: string) => (prefix ? `${prefix}.${field}` : field);

/** A key's state under one limit. */
const stateKey = (key: string, l: ExactLimit) => `${l.algorithm}|${l.rate}|${l.period}|${l.burst}|${key}`;

/**
 * LocalLimiter decides requests in this process alone, for its share of
 * each limit. Its memory is bounded: when `maxKeys` states are held it
 * drops them all and starts over (more permissive for a moment, never
 * unbounded).
 */
export class LocalLimiter {
  private readonly states = new Map<string, State>();

  constructor(
    private readonly replicas: number,
    private readonly maxKeys: number,
    private readonly nowMs: () => number,
  ) {}

  /**
   * decide answers req from this process's share of its limits, all checks
   * or none. A check that names a policy, which only the cluster knows,
   * denies. A request the cluster would refuse throws the same 400.
   */
  decide(req: AllowRequest): AllowResponse {
    const { checks, prefix } = checksOf(req);
    if (checks.length === 0 || checks.length > maxChecks) {
      throw invalid("checks", `checks must hold 1 to ${maxChecks} checks`);
    }
    const now = BigInt(Math.round(this.nowMs() * 1_000_000));
    const denied: AllowResponse = { allowed: false, limit: 0, remaining: 0, reset_after_ms: 0, retry_after_ms: 0 };
    const plan: Array<[string, State]> = [];
    let out: AllowResponse | undefined;
    let retryAfter = 0n;
    for (const [i, c] of checks.entries()) {
      const where = prefix(i);
      if (c.policy !== undefined) {
        return denied; // only the cluster knows the policy: fail closed
      }
      if (c.key === undefined || c.key === "" || new TextEncoder().encode(c.key).length > maxKeyBytes) {
        throw invalid(at(where, "key"), `key is required, 1 to ${maxKeyBytes} bytes`);
      }
      if (c.limit === undefined) {
        throw invalid(at(where, "limit"), "limit is required");
      }
      const full = exactLimit(c.limit, at(where, "limit"));
      const cost = BigInt(c.cost ?? 1);
      if (cost < 0n || cost > capacity(full)) {
        throw invalid(at(where, "cost"), `cost must be an integer from 0 to ${capacity(full)}`);
      }
      const limit = shareOf(full, BigInt(Math.max(1, Math.floor(this.replicas))));
      if (!fits(limit)) {
        return denied; // the share refills too slowly to be decided exactly
      }
      const id = stateKey(c.key, limit);
      const d = decide(limit, this.states.get(id) ?? noState, now, cost < capacity(limit) ? cost : capacity(limit));
      if (!d.allowed) {
        retryAfter = max(retryAfter, d.retryAfter);
      }
      if (out === undefined || Number(d.remaining) < out.remaining) {
        out = { allowed: true, limit: Number(d.limit), remaining: Number(d.remaining), reset_after_ms: msOf(d.resetAfter), retry_after_ms: 0 };
      }
      plan.push([id, d.next]);
    }
    const answer = out as AllowResponse;
    if (retryAfter > 0n) {
      return { ...answer, allowed: false, retry_after_ms: msOf(retryAfter) };
    }
    if (this.states.size + plan.length > this.maxKeys) {
      this.states.clear();
    }
    for (const [id, next] of plan) {
      this.states.set(id, next);
    }
    return answer;
  }
}
