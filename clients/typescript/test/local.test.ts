// The local fallback's decisions, on a clock the test sets: the cluster's
// algorithms, for this process's share of each limit.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { LimitnodeError } from "../src/errors.js";
import { LocalLimiter } from "../src/local.js";
import type { AllowRequest } from "../src/types.js";

/** A step: at ms on the clock, req is answered [allowed, remaining, retry_after_ms]. */
type Step = [ms: number, req: AllowRequest, want: [boolean, number, number]];

const bucket = { rate: 10, period: "1s" };
const key = (limit: AllowRequest["limit"]): AllowRequest => ({ key: "k", limit });

const cases: Array<{ name: string; replicas?: number; steps: Step[] }> = [
  {
    name: "a token bucket admits its burst at once, then one unit every period/rate",
    steps: [
      ...Array.from({ length: 10 }, (_, i): Step => [1000, key(bucket), [true, 9 - i, 0]]),
      [1000, key(bucket), [false, 0, 100]],
      [1100, key(bucket), [true, 0, 0]],
    ],
  },
  {
    name: "gcra and the leaky bucket decide as the token bucket does",
    steps: [
      [1000, key({ ...bucket, algorithm: "gcra", burst: 1 }), [true, 0, 0]],
      [1050, key({ ...bucket, algorithm: "gcra", burst: 1 }), [false, 0, 50]],
      [1000, key({ ...bucket, algorithm: "leaky_bucket", burst: 1 }), [true, 0, 0]],
      [1100, key({ ...bucket, algorithm: "leaky_bucket", burst: 1 }), [true, 0, 0]],
    ],
  },
  {
    name: "a fixed window admits rate per window and refills at the next one",
    steps: [
      [1500, key({ algorithm: "fixed_window", rate: 2, period: "1s" }), [true, 1, 0]],
      [1600, key({ algorithm: "fixed_window", rate: 2, period: "1s" }), [true, 0, 0]],
      [1700, key({ algorithm: "fixed_window", rate: 2, period: "1s" }), [false, 0, 300]],
      [2000, key({ algorithm: "fixed_window", rate: 2, period: "1s" }), [true, 1, 0]],
    ],
  },
  {
    name: "a sliding window log admits rate in any period",
    steps: [
      [10_000, key({ algorithm: "sliding_window_log", rate: 2, period: "1s" }), [true, 1, 0]],
      [10_400, key({ algorithm: "sliding_window_log", rate: 2, period: "1s" }), [true, 0, 0]],
      [10_500, key({ algorithm: "sliding_window_log", rate: 2, period: "1s" }), [false, 0, 500]],
      [11_000, key({ algorithm: "sliding_window_log", rate: 2, period: "1s" }), [true, 0, 0]],
    ],
  },
  {
    name: "a sliding window counter weighs the previous window by its overlap",
    steps: [
      ...Array.from({ length: 10 }, (_, i): Step => [1000, key({ algorithm: "sliding_window_counter", rate: 10, period: "1s" }), [true, 9 - i, 0]]),
      ...Array.from({ length: 5 }, (_, i): Step => [2500, key({ algorithm: "sliding_window_counter", rate: 10, period: "1s" }), [true, 4 - i, 0]]),
      [2500, key({ algorithm: "sliding_window_counter", rate: 10, period: "1s" }), [false, 0, 100]],
    ],
  },
  {
    name: "two replicas each enforce half of a limit",
    replicas: 2,
    steps: [
      ...Array.from({ length: 5 }, (_, i): Step => [1000, key(bucket), [true, 4 - i, 0]]),
      [1000, key(bucket), [false, 0, 200]],
    ],
  },
  {
    name: "checks are decided together: a denial consumes none of them",
    steps: [
      [1000, { checks: [{ key: "a", limit: { rate: 1, period: "1m" } }, { key: "b", limit: { rate: 5, period: "1m" } }] }, [true, 0, 0]],
      [1000, { checks: [{ key: "a", limit: { rate: 1, period: "1m" } }, { key: "b", limit: { rate: 5, period: "1m" } }] }, [false, 0, 60_000]],
      [1000, { key: "b", limit: { rate: 5, period: "1m" } }, [true, 3, 0]],
    ],
  },
  {
    name: "a policy, which only the cluster knows, is denied",
    steps: [[1000, { key: "k", policy: "per-user" }, [false, 0, 0]]],
  },
];

describe("the local fallback", () => {
  for (const c of cases) {
    it(c.name, () => {
      let now = 0;
      const local = new LocalLimiter(c.replicas ?? 1, 1000, () => now);
      c.steps.forEach(([ms, req, want], i) => {
        now = ms;
        const d = local.decide(req);
        assert.deepEqual([d.allowed, d.remaining, d.retry_after_ms], want, `step ${i}`);
      });
    });
  }

  it("forgets every key when it holds too many, and starts over", () => {
    const local = new LocalLimiter(1, 2, () => 1000);
    const one = { rate: 1, period: "1h" };
    assert.equal(local.decide({ key: "a", limit: one }).allowed, true);
    assert.equal(local.decide({ key: "a", limit: one }).allowed, false);
    assert.equal(local.decide({ key: "b", limit: one }).allowed, true);
    assert.equal(local.decide({ key: "c", limit: one }).allowed, true); // a third key: all forgotten
    assert.equal(local.decide({ key: "a", limit: one }).allowed, true);
  });

  const refusals: Array<[string, AllowRequest, string]> = [
    ["a cost above the capacity", { key: "k", limit: { rate: 5 }, cost: 6 }, "cost"],
    ["a window algorithm with a burst", { key: "k", limit: { algorithm: "fixed_window", rate: 5, burst: 5 } }, "limit.burst"],
    ["a period that is not a Go duration", { key: "k", limit: { rate: 5, period: "5 minutes" } }, "limit.period"],
    ["a rate of 0 in a check", { checks: [{ key: "a", limit: { rate: 1 } }, { key: "b", limit: { rate: 0 } }] }, "checks[1].limit.rate"],
    ["no key", { limit: { rate: 1 } }, "key"],
  ];
  for (const [what, req, field] of refusals) {
    it(`refuses ${what} as the cluster would, naming ${field}`, () => {
      const local = new LocalLimiter(1, 10, () => 1000);
      assert.throws(() => local.decide(req), (e: unknown) => e instanceof LimitnodeError && e.status === 400 && e.field === field);
    });
  }
});
