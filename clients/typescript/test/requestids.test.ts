// Which requests carry a request_id, against a real three-node cluster
// with API tokens whose callers may hold only 20 IDs at once (-max-request-ids-per-caller):
// plain decisions carry none, so they never spend that memory and their
// denials may be answered from deny leases; reservations carry one of the
// Limiter's own, and past the bound a new one is refused.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Limiter, UnavailableError } from "../src/index.js";
import { Cluster } from "./cluster.js";

const maxIDs = 20;

describe("request IDs against a cluster that remembers 20 per caller", () => {
  let cluster: Cluster;

  before(async () => {
    // With tokens: without them every caller is one, bound by the cluster's million.
    cluster = await Cluster.start({ flags: ["-max-request-ids-per-caller", String(maxIDs)], tokens: { service: ["decide"] } });
  });

  after(async () => {
    await cluster?.stop();
  });

  it("decides plain requests past the bound: they carry no request_id", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw", token: cluster.token("service") });
    const limit = { rate: 1000, period: "1h" };
    for (let i = 0; i < 3 * maxIDs; i++) {
      const d = await limiter.allow({ key: "plain", limit });
      assert.equal(d.allowed, true, `request ${i + 1}`);
      assert.equal(d.requestId, undefined);
    }
    const batch = await limiter.allowBatch(Array.from({ length: maxIDs + 1 }, () => ({ key: "plain-batch", limit })));
    assert.ok(batch.every((d) => !(d instanceof Error) && d.allowed && d.requestId === undefined));
  });

  it("answers repeated denials of a plain request from a deny lease where they arrive", async () => {
    const [follower] = await cluster.followers();
    const limiter = new Limiter({ nodes: [follower.http], onFailure: "throw", token: cluster.token("service") });
    const limit = { rate: 1, period: "1h" };
    assert.equal((await limiter.allow({ key: "spent", limit })).allowed, true);
    const denials = [];
    for (let i = 0; i < 5; i++) denials.push(await limiter.allow({ key: "spent", limit }));
    assert.ok(denials.every((d) => !d.allowed && !d.degraded));
    assert.ok(
      denials.some((d) => d.leased && d.leader === undefined),
      `no denial came from a deny lease: ${JSON.stringify(denials.map((d) => [d.leased, d.leader]))}`,
    );
  });

  it("gives reservations a request_id of their own, which the bound counts", async () => {
    const limiter = new Limiter({ nodes: cluster.addresses(), onFailure: "throw", timeoutMs: 500, token: cluster.token("service") });
    const paced = { key: "paced", limit: { algorithm: "gcra" as const, rate: 1000, period: "1s", burst: 1000 } };
    const ids = new Set<string>();
    for (let i = 0; i < maxIDs; i++) {
      const d = await limiter.allow({ ...paced, max_wait: "1s" });
      assert.equal(d.allowed, true);
      assert.ok(d.requestId !== undefined && !ids.has(d.requestId), `request ${i + 1}'s request_id: ${d.requestId}`);
      ids.add(d.requestId);
    }
    await assert.rejects(limiter.allow({ ...paced, max_wait: "1s" }), (e: unknown) => {
      assert.ok(e instanceof UnavailableError, String(e));
      assert.equal(e.status, 503);
      assert.equal(e.field, "request_id");
      return true;
    });
    // A plain request still goes: it needs no ID.
    assert.equal((await limiter.allow(paced)).allowed, true);
  });
});
