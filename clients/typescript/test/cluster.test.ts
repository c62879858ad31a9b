// The client against a real three-node cluster, in order: answers from a
// follower, denials with their headers, batches, leases, the middleware,
// then a leader killed mid-traffic, then a cluster without a quorum
// answered by each failure policy. The last two change the cluster, so they
// come last.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";

import { LeaseLostError, LimitnodeError, Limiter, rateLimit, UnavailableError, type RetryEvent } from "../src/index.js";
import { Cluster, waitFor } from "./cluster.js";

/** A counter: a bucket of 100,000 that refills 100,000 a year, so a test's charges are what it spent. */
const counter = { rate: 100_000, period: "8760h", burst: 100_000 };

/** spent is how much of counter the key has used, asked with cost 0 through limiter. */
async function spent(limiter: Limiter, key: string): Promise<number> {
  const d = await limiter.allow({ key, limit: counter, cost: 0 });
  return counter.burst - d.remaining;
}

describe("a three-node cluster", () => {
  let cluster: Cluster;

  before(async () => {
    cluster = await Cluster.start();
  });

  after(async () => {
    await cluster?.stop();
  });

  it("is answered through a follower with the leader's decision", async () => {
    const leader = await cluster.leader();
    const [follower] = await cluster.followers();
    const limiter = new Limiter({ nodes: [follower.http], onFailure: "throw" });
    const d = await limiter.allow({ key: "follower", limit: { rate: 10, period: "1m" } });
    assert.equal(d.allowed, true);
    assert.equal(d.status, 200);
    assert.equal(d.remaining, 9);
    assert.equal(d.leader, leader.id);
    assert.equal(d.degraded, false);
    assert.equal(d.attempts, 1);
    assert.equal(d.headers["RateLimit-Remaining"], "9");
    assert.ok(Math.abs(d.resetAt - (Date.now() + d.reset_after_ms)) < 1000, `resetAt ${d.resetAt}, reset_after_ms ${d.reset_after_ms}`);
  });

  it("reports a denial as a 429 with the headers the cluster sent", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw" });
    const limit = { rate: 2, period: "1m" };
    await limiter.allow({ key: "denied", limit });
    await limiter.allow({ key: "denied", limit });
    const d = await limiter.allow({ key: "denied", limit });
    assert.equal(d.allowed, false);
    assert.equal(d.status, 429);
    assert.ok(d.retry_after_ms > 0 && d.retry_after_ms <= 60_000, `retry_after_ms ${d.retry_after_ms}`);
    assert.ok(d.retryAfterSeconds >= Math.ceil(d.retry_after_ms / 1000), `Retry-After ${d.retryAfterSeconds} is early`);
    assert.equal(d.headers["Retry-After"], String(d.retryAfterSeconds));
    assert.equal(d.headers["RateLimit-Limit"], "2");
    assert.equal(d.headers["RateLimit-Remaining"], "0");
    assert.equal(d.headers["RateLimit-Policy"], '"default";q=2;w=60');
    assert.match(d.headers.RateLimit, /^"default";r=0;t=\d+$/);
  });

  it("charges a request_id once, and answers its repeat with the first decision", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses().reverse(), onFailure: "throw" });
    const req = { key: "repeat", limit: counter, request_id: "repeat-1" };
    const first = await limiter.allow(req);
    const again = await limiter.allow(req);
    assert.equal(first.duplicate, undefined);
    assert.equal(again.duplicate, true);
    assert.equal(again.remaining, first.remaining);
    assert.equal(await spent(limiter, "repeat"), 1);
  });

  it("decides a batch item by item, refusing a bad item alone", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw" });
    const limit = { rate: 1, period: "1m" };
    const out = await limiter.allowBatch([
      { key: "batch", limit },
      { key: "batch", limit },
      { key: "batch-bad", limit: { rate: 0 } },
    ]);
    assert.equal(out.length, 3);
    const [first, second, bad] = out;
    assert.ok(!(first instanceof LimitnodeError) && first.allowed && first.status === 200);
    assert.ok(!(second instanceof LimitnodeError) && !second.allowed && second.status === 429);
    assert.ok(second.retryAfterSeconds >= 1);
    assert.ok(bad instanceof LimitnodeError);
    assert.equal(bad.status, 400);
    assert.equal(bad.code, "invalid_argument");
    assert.equal(bad.field, "limit.rate");
  });

  it("refuses an invalid request with the field at fault, whatever the failure policy", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "open" });
    await assert.rejects(limiter.allow({ key: "bad", limit: { rate: 10, period: "soon" } }), (e: unknown) => {
      assert.ok(e instanceof LimitnodeError && !(e instanceof UnavailableError));
      assert.equal(e.status, 400);
      assert.equal(e.field, "limit.period");
      return true;
    });
  });

  it("acquires, refuses, renews, queues and releases leases", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw" });
    const req = { key: "reports", max: 1, ttl: "30s" };
    const held = await limiter.acquireLease(req);
    assert.ok(held.granted);
    const refused = await limiter.acquireLease(req);
    assert.ok(!refused.granted);
    assert.ok(refused.retryAfterSeconds >= 1 && refused.active === 1);
    const renewed = await limiter.renewLease(held.id, "2m");
    assert.ok(renewed.expires_in_ms > 60_000, `expires in ${renewed.expires_in_ms} ms`);

    // A waiter in the queue is granted the slot once it is given back.
    const waiting = limiter.withLease({ ...req, max_wait: "20s", max_queue: 5 }, async () => "built");
    await waitFor("the waiter in the queue", async () => {
      const resp = await fetch(`http://${cluster.addresses()[0]}/v1/leases?key=reports`);
      return ((await resp.json()) as { waiting: unknown[] }).waiting.length === 1;
    });
    await limiter.releaseLease(held.id);
    assert.equal(await waiting, "built");
    await assert.rejects(limiter.releaseLease(held.id), (e: unknown) => e instanceof LimitnodeError && e.status === 404);
    // withLease gave its lease back: the slot is free again.
    const again = await limiter.acquireLease(req);
    assert.ok(again.granted);
    await limiter.releaseLease(again.id);
  });

  it("aborts withLease's work when its lease is given back elsewhere", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw" });
    const other = new Limiter({ nodes: cluster.addresses().reverse(), onFailure: "throw" });
    const listed = async () => {
      const resp = await fetch(`http://${cluster.addresses()[1]}/v1/leases?key=lost`);
      return ((await resp.json()) as { leases: Array<{ id: string }> }).leases;
    };
    let aborted: unknown;
    const run = limiter.withLease({ key: "lost", max: 1, ttl: "3s" }, (signal) =>
      new Promise<string>((resolve) => {
        signal.addEventListener("abort", () => {
          aborted = signal.reason;
          resolve("stopped");
        });
      }),
    );
    await waitFor("the lease to be held", async () => (await listed()).length === 1);
    await other.releaseLease((await listed())[0].id);
    await assert.rejects(run, LeaseLostError);
    assert.ok(aborted instanceof LeaseLostError, `the work's signal was aborted with ${aborted}`);
  });

  it("answers a denial from the middleware with the cluster's headers", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw" });
    const limit = rateLimit(limiter, {
      request: (req) => (req.url === "/healthz" ? null : { key: `mw:${req.headers["x-api-key"]}`, limit: { rate: 1, period: "1m" } }),
    });
    const server: Server = createServer((req, res) => limit(req, res, () => res.end("served\n")));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const get = (path: string) => fetch(url + path, { headers: { "x-api-key": "k1" } });
      const ok = await get("/export");
      assert.equal(ok.status, 200);
      assert.equal(await ok.text(), "served\n");
      assert.equal(ok.headers.get("ratelimit-remaining"), "0");
      assert.equal(ok.headers.get("retry-after"), null);
      const denied = await get("/export");
      assert.equal(denied.status, 429);
      assert.equal(denied.headers.get("ratelimit-limit"), "1");
      assert.equal(denied.headers.get("ratelimit-policy"), '"default";q=1;w=60');
      assert.ok(Number(denied.headers.get("retry-after")) >= 1);
      assert.equal(denied.headers.get("x-limitnode-degraded"), null);
      assert.equal(denied.headers.get("limitnode-denied-by"), null, "an internal header reached the end client");
      const body = (await denied.json()) as Record<string, any>;
      assert.deepEqual(Object.keys(body).sort(), ["allowed", "denied_by", "limit", "remaining", "reset_after_ms", "retry_after_ms"]);
      assert.equal(body.allowed, false);
      assert.deepEqual(body.denied_by, { check: 0, limit: { algorithm: "token_bucket", rate: 1, period: "1m0s", burst: 1 }, cause: "limit" });
      assert.equal((await get("/healthz")).status, 200); // not limited

      // A blocked key: what denied it and why, and never the key.
      await limiter.putBlock("mw:k-blocked", "1m", "chargeback under review");
      const blocked = await fetch(url + "/export", { headers: { "x-api-key": "k-blocked" } });
      assert.equal(blocked.status, 429);
      assert.equal(blocked.headers.get("limitnode-denied-by"), null);
      const text = await blocked.text();
      assert.ok(!text.includes("k-blocked"), `the key reached the end client: ${text}`);
      const why = JSON.parse(text) as Record<string, any>;
      assert.equal(why.blocked.reason, "chargeback under review");
      assert.ok(why.blocked.ends_in_ms > 0);
      assert.equal(why.denied_by.cause, "block");
      await limiter.deleteBlock("mw:k-blocked");
    } finally {
      server.close();
    }
  });

  it("reserves, then settles: the rest goes back, a repeat is answered once, another cost is refused", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw" });
    await limiter.putPolicy("tokens", { limit: { rate: 3600, period: "1h", burst: 1000 }, max_debt: 100 });
    const res = await limiter.reserve({ policy: "tokens", key: "acme", cost: 500 }, "1m");
    assert.ok(res.decision.allowed && res.decision.settlement_id, `the reservation: ${JSON.stringify(res.decision)}`);
    const s = await res.settle(120);
    assert.ok(s !== null);
    assert.deepEqual([s.reserved, s.cost, s.refunded, s.charged, s.duplicate], [500, 120, 380, 0, undefined]);
    const left = (await limiter.allow({ policy: "tokens", key: "acme", cost: 0 })).remaining;
    assert.ok(left >= 880 && left <= 900, `${left} left after the refund, want 880 and what refilled since`);
    const again = await res.settle(120);
    assert.equal(again?.duplicate, true);
    assert.equal(again?.refunded, 380);
    await assert.rejects(res.settle(130), (e: unknown) => e instanceof LimitnodeError && e.status === 409 && e.field === "settlement_id");
    await assert.rejects(limiter.settle("s0.0", 1), (e: unknown) => e instanceof LimitnodeError && e.status === 404);

    // More than reserved: charged into debt up to max_debt, the key denied until repaid.
    const big = await limiter.reserve({ policy: "tokens", key: "bob", cost: 900 }, "1m");
    const over = await big.settle(1300);
    assert.ok(over !== null && over.charged >= 200 && over.charged + (over.forgiven ?? 0) === 400, JSON.stringify(over));
    const denied = await limiter.allow({ policy: "tokens", key: "bob" });
    assert.equal(denied.allowed, false);
    assert.ok(denied.retryAfterSeconds >= 90, `Retry-After ${denied.retryAfterSeconds}`);

    // A denied reservation has nothing to settle.
    const none = await limiter.reserve({ policy: "tokens", key: "bob", cost: 1 }, "1m");
    assert.equal(none.decision.allowed, false);
    assert.equal(await none.settle(0), null);
  });

  it("waits for capacity: a reservation within max_wait is slept out, one beyond is denied at once", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw" });
    const req = { key: "paced", limit: { algorithm: "gcra" as const, rate: 1, period: "2s", burst: 1 } };
    const start = performance.now(); // before the burst: the next unit is due 2 s after it
    assert.equal((await limiter.allow(req)).allowed, true);
    const early = await limiter.wait(req, 1);
    assert.equal(early.allowed, false);
    const d = await limiter.wait(req, 3000);
    const took = performance.now() - start;
    assert.equal(d.allowed, true);
    assert.equal(d.wait_ms, 0);
    assert.ok(took >= 1990, `admitted ${took} ms after the burst; want 2 s`);
    await assert.rejects(limiter.wait({ key: "window", limit: { algorithm: "fixed_window", rate: 1 } }, 1000), (e: unknown) => e instanceof LimitnodeError && e.field === "max_wait");
  });

  it("reads, lists and resets keys", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw" });
    const limit = { rate: 10, period: "1h" };
    await limiter.allow({ key: "keys:a", limit, cost: 3 });
    await limiter.allow({ key: "keys:b", limit });
    const a = await limiter.getKey("keys:a");
    assert.equal(a.key, "keys:a");
    assert.equal(a.limits.length, 1);
    assert.equal(a.limits[0].remaining, 7);
    assert.equal(a.limits[0].owner, undefined);
    const page = await limiter.listKeys({ prefix: "keys:", limit: 1 });
    assert.deepEqual(
      page.keys.map((k) => k.key),
      ["keys:a"],
    );
    assert.equal(page.next, "keys:a");
    const rest = await limiter.listKeys({ prefix: "keys:", after: page.next });
    assert.deepEqual(
      rest.keys.map((k) => k.key),
      ["keys:b"],
    );
    assert.equal(await limiter.resetKey("keys:a"), 1);
    await assert.rejects(limiter.getKey("keys:a"), (e: unknown) => e instanceof LimitnodeError && e.status === 404);
    assert.equal((await limiter.allow({ key: "keys:a", limit })).remaining, 9);
    await assert.rejects(limiter.resetKey("keys:never"), (e: unknown) => e instanceof LimitnodeError && e.status === 404);
  });

  it("blocks a key on every node, lists it and lifts it", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw" });
    const block = await limiter.putBlock("api-key:scraper", "10m", "scraping the catalogue");
    assert.equal(block.key, "api-key:scraper");
    assert.equal(block.reason, "scraping the catalogue");
    assert.ok(block.ends_in_ms > 590_000 && Math.abs(block.until_unix_ms - block.since_unix_ms - 600_000) <= 1, JSON.stringify(block));
    for (const addr of cluster.addresses()) {
      const d = await new Limiter({ nodes: [addr], onFailure: "throw" }).allow({ key: "api-key:scraper", limit: { rate: 100, period: "1m" } });
      assert.equal(d.allowed, false);
      assert.equal(d.blocked?.reason, "scraping the catalogue");
      assert.equal(d.denied_by?.cause, "block");
    }
    const page = await limiter.listBlocks({ limit: 100 });
    assert.ok(page.blocks.some((b) => b.key === "api-key:scraper"));
    const lifted = await limiter.deleteBlock("api-key:scraper");
    assert.equal(lifted.reason, "scraping the catalogue");
    assert.equal((await limiter.allow({ key: "api-key:scraper", limit: { rate: 100, period: "1m" } })).allowed, true);
    await assert.rejects(limiter.deleteBlock("api-key:scraper"), (e: unknown) => e instanceof LimitnodeError && e.status === 404);
    await assert.rejects(limiter.putBlock("k", "1ms"), (e: unknown) => e instanceof LimitnodeError && e.status === 400 && e.field === "ttl");
  });

  it("puts, reads, lists and deletes policies", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw" });
    const put = await limiter.putPolicy("per-tenant", {
      limit: { rate: 100, period: "1m" },
      overrides: { "tenant=big": { rate: 1000, period: "1m" } },
      key_template: "{tenant}:{route}",
    });
    assert.equal(put.name, "per-tenant");
    assert.equal(put.limit.algorithm, "token_bucket");
    const d = await limiter.allow({ policy: "per-tenant", dimensions: { tenant: "big", route: "/x" } });
    assert.equal(d.limit, 1000);
    const got = await limiter.getPolicy("per-tenant");
    assert.ok((got.version ?? 0) > 0, `version ${got.version}`);
    assert.equal(got.key_template, "{tenant}:{route}");
    const page = await limiter.listPolicies({ limit: 1000 });
    assert.ok(page.policies.some((p) => p.name === "per-tenant"));
    await limiter.deletePolicy("per-tenant");
    await assert.rejects(limiter.getPolicy("per-tenant"), (e: unknown) => e instanceof LimitnodeError && e.status === 404);
    await assert.rejects(limiter.putPolicy("bad", { limit: { rate: 0 } }), (e: unknown) => e instanceof LimitnodeError && e.field === "limit.rate");
  });

  it("passes a node stopped with SIGSTOP within a third of the timeout, and keeps to the nodes that answer", async () => {
    const [stopped, ...others] = await cluster.followers();
    const leader = await cluster.leader();
    await cluster.pause(stopped);
    try {
      const limiter = new Limiter({ nodes: [stopped.http, leader.http, ...others.map((n) => n.http)], onFailure: "closed", timeoutMs: 2000 });
      for (let i = 0; i < 5; i++) {
        const start = performance.now();
        const d = await limiter.allow({ key: "behind-a-stopped-node", limit: { rate: 10, period: "1h" } });
        const took = performance.now() - start;
        assert.equal(d.degraded, false, `call ${i + 1}: degraded by ${d.cause}`);
        assert.equal(d.remaining, 9 - i);
        if (i === 0) assert.ok(took >= 600, `the first call took ${took} ms: it never waited for the stopped node`);
        else assert.ok(took < 600, `call ${i + 1} took ${took} ms: it went back to the stopped node`);
      }
    } finally {
      cluster.resume(stopped);
    }
  });

  it("retries an unknown outcome with the same request_id when the leader is killed, and is charged once", async () => {
    const leader = await cluster.leader();
    const followers = await cluster.followers();
    const nodes = [leader.http, ...followers.map((f) => f.http)];

    // One request the leader holds open: a reservation it waits out
    // (hold), charged on a counter too. The leader is killed while it
    // holds it, so the client cannot know whether it was decided.
    const spacing = { algorithm: "gcra" as const, rate: 1, period: "2s", burst: 1 };
    const watcher = new Limiter({ nodes: followers.map((f) => f.http), onFailure: "throw", timeoutMs: 20_000 });
    await watcher.allow({ key: "held", limit: spacing });
    const retries: RetryEvent[] = [];
    const client = new Limiter({ nodes, onFailure: "throw", timeoutMs: 20_000, onRetry: (e) => retries.push(e) });
    const held = client.allow({
      checks: [
        { key: "held", limit: spacing },
        { key: "held-counter", limit: counter },
      ],
      max_wait: "10s",
      hold: true,
    });

    // Traffic through every node while it happens: plain requests, which
    // carry no request_id, so that each retry may have cost one unit more.
    let stop = false;
    let allowed = 0;
    let trafficRetries = 0;
    const traffic = new Limiter({ nodes, onFailure: "throw", timeoutMs: 20_000, onRetry: () => trafficRetries++ });
    const workers = Array.from({ length: 4 }, async () => {
      while (!stop) {
        const d = await traffic.allow({ key: "traffic", limit: counter });
        assert.ok(d.allowed);
        allowed++;
      }
    });

    await waitFor("the held request to be decided", async () => (await spent(watcher, "held-counter")) === 1);
    await cluster.kill(leader);
    const d = await held;
    const before = allowed;
    await waitFor("traffic after the new leader", async () => allowed > before + 20);
    stop = true;
    await Promise.all(workers);

    assert.equal(d.allowed, true);
    assert.equal(d.duplicate, true, "the retry was not answered with the first decision");
    assert.ok(d.attempts >= 2, `${d.attempts} attempts`);
    assert.ok(retries.length >= 1);
    assert.equal(retries[0].node, `http://${leader.http}`);
    for (const r of retries) {
      assert.equal(r.requestId, d.requestId, "a retry carried another request_id");
    }
    assert.equal(await spent(watcher, "held-counter"), 1, "the held request was charged more than once");
    const trafficSpent = await spent(watcher, "traffic");
    assert.ok(
      trafficSpent >= allowed && trafficSpent <= allowed + trafficRetries,
      `the traffic spent ${trafficSpent} for ${allowed} admitted with ${trafficRetries} retries`,
    );
  });

  it("answers by its failure policy when the cluster has no quorum", async () => {
    // One node of three left: it answers, but cannot decide.
    const [doomed, survivor] = cluster.live();
    await cluster.kill(doomed);
    const dead = cluster.nodes.filter((n) => n !== survivor).map((n) => n.http);
    const limit = { rate: 4, period: "1h" };
    const ask = (onFailure: "closed" | "open" | "throw", nodes: string[]) =>
      new Limiter({ nodes, onFailure, timeoutMs: 800 }).allow({ key: "no-quorum", limit });

    const closed = await ask("closed", [survivor.http, ...dead]);
    assert.equal(closed.allowed, false);
    assert.equal(closed.status, 429);
    assert.equal(closed.degraded, true);
    assert.ok(closed.cause instanceof UnavailableError);
    assert.equal(closed.headers["X-Limitnode-Degraded"], "true");
    assert.equal(closed.headers["Retry-After"], "1");

    const open = await ask("open", [...dead, survivor.http]);
    assert.equal(open.allowed, true);
    assert.equal(open.degraded, true);

    await assert.rejects(ask("throw", [survivor.http]), (e: unknown) => {
      assert.ok(e instanceof UnavailableError);
      assert.equal(e.outcomeUnknown, true); // the request reached the survivor
      return true;
    });
    await assert.rejects(ask("throw", dead), (e: unknown) => {
      assert.ok(e instanceof UnavailableError);
      assert.equal(e.outcomeUnknown, false); // no node could be reached
      return true;
    });

    // Two replicas share the limit: each may pass 2 of the 4 alone.
    const local = new Limiter({ nodes: dead, onFailure: "local", replicas: 2 });
    const answers = [];
    for (let i = 0; i < 3; i++) {
      answers.push(await local.allow({ key: "no-quorum", limit }));
    }
    assert.deepEqual(
      answers.map((a) => [a.allowed, a.degraded, a.limit, a.remaining]),
      [
        [true, true, 2, 1],
        [true, true, 2, 0],
        [false, true, 2, 0],
      ],
    );
    assert.ok(answers[2].retry_after_ms > 0);
    assert.equal(answers[2].headers["RateLimit-Limit"], "2");
    await assert.rejects(
      local.allow({ key: "no-quorum", limit: { rate: 4, period: "1h", algorithm: "fixed_window", burst: 2 } }),
      (e: unknown) => e instanceof LimitnodeError && e.status === 400 && e.field === "limit.burst",
    );
  });
});
