// The retry rule against scripted nodes: real HTTP servers on 127.0.0.1
// that answer as a node would in each case (a 503 with Retry-After, a
// connection cut after the request arrived, a node that never answers).

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";

import { Limiter, UnavailableError, type RetryEvent } from "../src/index.js";

type Script = (req: IncomingMessage, body: string, res: ServerResponse) => void;

const allowed = JSON.stringify({ allowed: true, limit: 10, remaining: 9, reset_after_ms: 100, retry_after_ms: 0 });

/** A scripted node: every request it got, and its address. */
interface Scripted {
  addr: string;
  bodies: string[];
  server: Server;
}

const servers: Server[] = [];

after(() => {
  for (const s of servers) s.closeAllConnections(), s.close();
});

/** node starts a server that answers its nth request (from 0) with scripts[n], the last script after that. */
async function node(...scripts: Script[]): Promise<Scripted> {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => {
      bodies.push(body);
      scripts[Math.min(bodies.length - 1, scripts.length - 1)](req, body, res);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { addr: `127.0.0.1:${(server.address() as AddressInfo).port}`, bodies, server };
}

/** closedAddress is an address nothing listens on: a port the OS gave and took back. */
async function closedAddress(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const addr = `127.0.0.1:${(s.address() as AddressInfo).port}`;
  await new Promise<void>((r) => s.close(() => r()));
  return addr;
}

const answer =
  (status: number, body: string, headers: Record<string, string> = {}): Script =>
  (_req, _body, res) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(body);
  };
const unavailable = answer(503, JSON.stringify({ error: "no leader could be reached in time; retry", code: "unavailable" }), { "retry-after": "1" });
const cutOff: Script = (req) => req.socket.destroy();
const never: Script = () => {};

const idOf = (body: string) => (JSON.parse(body) as { request_id?: string }).request_id;
const limit = { rate: 10, period: "1s" };

describe("the retry rule", () => {
  it("moves on at once from a node that refuses the connection", async () => {
    const up = await node(answer(200, allowed));
    const retries: RetryEvent[] = [];
    const limiter = new Limiter({ nodes: [await closedAddress(), up.addr], onFailure: "throw", onRetry: (e) => retries.push(e) });
    const d = await limiter.allow({ key: "k", limit });
    assert.equal(d.allowed, true);
    assert.equal(d.attempts, 2);
    assert.equal(retries.length, 0, "a request that never left is no retry");
  });

  it("sends a request cut off after it arrived to the next node, with the same request_id", async () => {
    const broken = await node(cutOff);
    const up = await node(answer(200, allowed));
    const retries: RetryEvent[] = [];
    const limiter = new Limiter({ nodes: [broken.addr, up.addr], onFailure: "throw", onRetry: (e) => retries.push(e) });
    const d = await limiter.allow({ key: "k", limit });
    assert.equal(d.attempts, 2);
    assert.equal(broken.bodies.length, 1);
    assert.equal(up.bodies.length, 1);
    assert.ok(idOf(broken.bodies[0]));
    assert.equal(idOf(up.bodies[0]), idOf(broken.bodies[0]));
    assert.equal(d.requestId, idOf(up.bodies[0]));
    assert.deepEqual(retries.map((r) => [r.node, r.requestId, r.delayMs]), [[`http://${broken.addr}`, d.requestId, 0]]);
  });

  it("waits out a 503's Retry-After, then retries with the same request_id", async () => {
    const flaky = await node(unavailable, answer(200, allowed));
    const retries: RetryEvent[] = [];
    const limiter = new Limiter({ nodes: [flaky.addr], onFailure: "throw", timeoutMs: 5000, onRetry: (e) => retries.push(e) });
    const d = await limiter.allow({ key: "k", limit, request_id: "mine" });
    assert.equal(d.allowed, true);
    assert.deepEqual(flaky.bodies.map(idOf), ["mine", "mine"]);
    assert.equal(retries.length, 1);
    assert.equal(retries[0].delayMs, 1000);
  });

  it("gives up at once when a Retry-After outlasts the timeout", async () => {
    const down = await node(unavailable);
    const limiter = new Limiter({ nodes: [down.addr], onFailure: "throw", timeoutMs: 500 });
    await assert.rejects(limiter.allow({ key: "k", limit }), (e: unknown) => {
      assert.ok(e instanceof UnavailableError);
      assert.equal(e.status, 503);
      assert.equal(e.code, "unavailable");
      return true;
    });
    assert.equal(down.bodies.length, 1);
  });

  it("answers by the failure policy when no node answers in time", async () => {
    const silent = await node(never);
    const limiter = new Limiter({ nodes: [silent.addr], onFailure: "open", timeoutMs: 300 });
    const d = await limiter.allow({ key: "k", limit });
    assert.equal(d.allowed, true);
    assert.equal(d.degraded, true);
    assert.ok(d.cause instanceof UnavailableError && d.cause.outcomeUnknown);
  });

  it("throws the caller's abort, which no failure policy answers", async () => {
    const silent = await node(never);
    const limiter = new Limiter({ nodes: [silent.addr], onFailure: "open", timeoutMs: 5000 });
    const abort = new AbortController();
    const call = limiter.allow({ key: "k", limit }, { signal: abort.signal });
    abort.abort(new Error("the caller went away"));
    await assert.rejects(call, /the caller went away/);
  });

  it("does not acquire a lease twice after an unknown outcome", async () => {
    const broken = await node(cutOff);
    const up = await node(answer(200, JSON.stringify({ granted: true, id: "l1", key: "k", max: 1, active: 1, expires_in_ms: 1000, retry_after_ms: 0 })));
    const limiter = new Limiter({ nodes: [broken.addr, up.addr] });
    await assert.rejects(limiter.acquireLease({ key: "k", max: 1, ttl: "1s" }), (e: unknown) => e instanceof UnavailableError && e.outcomeUnknown);
    assert.equal(up.bodies.length, 0);
  });

  it("takes a release retried after an unknown outcome that finds no lease as done", async () => {
    const broken = await node(cutOff);
    const up = await node(answer(404, JSON.stringify({ error: "no lease l1", code: "not_found", field: "id" })));
    const limiter = new Limiter({ nodes: [broken.addr, up.addr] });
    await limiter.releaseLease("l1");
    assert.equal(up.bodies.length, 1);
  });
});
