// The retry rule against scripted nodes: real HTTP servers on 127.0.0.1
// that answer as a node would in each case (a 503 with Retry-After, a
// connection cut after the request arrived, a node that never answers),
// and as no node should (answers that are not JSON, of the wrong types,
// endless, dripped), and a listener that takes connections and never reads
// them, as the kernel does for a node stopped with SIGSTOP.

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createNetServer, type AddressInfo, type Socket } from "node:net";
import { after, describe, it } from "node:test";

import { Limiter, maxAnswerBytes, maxRetryAfterSeconds, UnavailableError, type RetryEvent } from "../src/index.js";

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

/** hung starts a listener that takes connections and never reads nor answers them; it returns its address and how many it took. */
async function hung(): Promise<{ addr: string; taken: () => number }> {
  const sockets: Socket[] = [];
  const server = createNetServer((socket) => {
    socket.pause();
    sockets.push(socket);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return { addr: `127.0.0.1:${(server.address() as AddressInfo).port}`, taken: () => sockets.length };
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
/** raw answers status with body as given, and headers. */
const raw =
  (status: number, body: string | Buffer, headers: Record<string, string> = {}): Script =>
  (_req, _body, res) => {
    res.writeHead(status, headers);
    res.end(body);
  };
/** endless answers 200 and writes a JSON string's bytes until the client goes away, counting what it wrote. */
const endless =
  (written: { bytes: number }): Script =>
  (_req, _body, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    res.write('{"allowed":true');
    const more = () => {
      while (!res.destroyed && written.bytes < 1 << 30) {
        written.bytes += chunk.length;
        if (!res.write(chunk)) {
          res.once("drain", more);
          return;
        }
      }
    };
    res.on("close", () => res.removeAllListeners("drain"));
    more();
  };
/** drip answers 200 and then one byte of the body every 100 ms. */
const drip: Script = (_req, _body, res) => {
  res.writeHead(200, { "content-type": "application/json" });
  const timer = setInterval(() => (res.destroyed ? clearInterval(timer) : res.write(" ")), 100);
};

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

  const cutOffCases = [
    { name: "a plain request, without a request_id", req: { key: "k", limit }, withId: false },
    { name: "one with max_wait, with a request_id of the Limiter's own", req: { key: "k", limit, max_wait: "1s" }, withId: true },
    { name: "a reservation to settle, with a request_id of the Limiter's own", req: { key: "k", limit, settle: { ttl: "1m" } }, withId: true },
    { name: "one with the caller's request_id, with it", req: { key: "k", limit, request_id: "mine" }, withId: true },
  ];
  for (const c of cutOffCases) {
    it(`sends a request cut off after it arrived to the next node as it was: ${c.name}`, async () => {
      const broken = await node(cutOff);
      const up = await node(answer(200, allowed));
      const retries: RetryEvent[] = [];
      const limiter = new Limiter({ nodes: [broken.addr, up.addr], onFailure: "throw", onRetry: (e) => retries.push(e) });
      const d = await limiter.allow(c.req);
      assert.equal(d.attempts, 2);
      assert.equal(broken.bodies.length, 1);
      assert.equal(up.bodies.length, 1);
      assert.equal(idOf(broken.bodies[0]) !== undefined, c.withId, `sent ${broken.bodies[0]}`);
      assert.equal(idOf(up.bodies[0]), idOf(broken.bodies[0]));
      assert.equal(d.requestId, idOf(up.bodies[0]));
      if (c.req.request_id !== undefined) assert.equal(d.requestId, c.req.request_id);
      assert.deepEqual(retries.map((r) => [r.node, r.requestId, r.delayMs]), [[`http://${broken.addr}`, d.requestId, 0]]);
    });
  }

  it("gives a request_id to a batch's reservations only", async () => {
    const up = await node(answer(200, JSON.stringify({ responses: [{ ...JSON.parse(allowed), status: 200 }, { ...JSON.parse(allowed), status: 200 }] })));
    const limiter = new Limiter({ nodes: [up.addr], onFailure: "throw" });
    const [plain, waiting] = await limiter.allowBatch([{ key: "k", limit }, { key: "k", limit, max_wait: "1s" }]);
    const sent = (JSON.parse(up.bodies[0]) as { requests: Array<{ request_id?: string }> }).requests;
    assert.equal(sent[0].request_id, undefined);
    assert.ok(sent[1].request_id);
    assert.ok(!(plain instanceof Error) && plain.requestId === undefined);
    assert.ok(!(waiting instanceof Error) && waiting.requestId === sent[1].request_id);
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

  it("gives a node that takes the call and never answers a third of the timeout, then asks the next and keeps to it", async () => {
    const stopped = await hung();
    const up = await node(answer(200, allowed));
    const limiter = new Limiter({ nodes: [stopped.addr, up.addr], onFailure: "closed", timeoutMs: 1500 });
    let start = performance.now();
    const d = await limiter.allow({ key: "k", limit });
    const first = performance.now() - start;
    assert.equal(d.degraded, false, `degraded: ${d.cause}`);
    assert.equal(d.allowed, true);
    assert.equal(d.attempts, 2);
    assert.ok(first >= 450 && first < 1200, `the first call took ${first} ms; want about a third of 1500`);
    assert.ok(stopped.taken() >= 1, "the hung node was never asked");
    start = performance.now();
    const next = await limiter.allow({ key: "k", limit });
    assert.equal(next.attempts, 1, "the next call went back to the hung node");
    assert.ok(performance.now() - start < 400, "the next call went back to the hung node");
    assert.deepEqual(up.bodies.map(idOf), [undefined, undefined]);
  });

  it("answers a malformed decision by the failure policy, never by throwing past it", async () => {
    const fields = '"limit":5,"remaining":4,"reset_after_ms":100,"retry_after_ms":0';
    const written = { bytes: 0 };
    const cases: Array<[string, Script]> = [
      ["a body that is not JSON", raw(200, "<html>not a decision</html>")],
      ["null", raw(200, "null")],
      ["an empty object", raw(200, "{}")],
      ["allowed as a string", raw(200, `{"allowed":"false",${fields}}`)],
      ["allowed as a number", raw(200, `{"allowed":1,${fields}}`)],
      ["a number as a string", raw(200, '{"allowed":true,"limit":"5","remaining":4,"reset_after_ms":100,"retry_after_ms":0}')],
      ["a fraction", raw(200, '{"allowed":true,"limit":5.5,"remaining":4,"reset_after_ms":100,"retry_after_ms":0}')],
      ["a negative wait", raw(200, `{"allowed":true,${fields},"wait_ms":-1000}`)],
      ["checks that are not a list", raw(200, `{"allowed":true,${fields},"checks":{}}`)],
      ["a denial with status 200", raw(200, `{"allowed":false,${fields}}`)],
      ["an admission with status 429", raw(429, `{"allowed":true,${fields}}`)],
      ["bytes that are not UTF-8", raw(200, Buffer.from([0x7b, 0xff, 0xfe, 0x7d]))],
      ["a declared length over the bound", raw(200, "", { "content-length": String(3 * 2 ** 30) })],
      ["an endless body", endless(written)],
      ["a redirect", raw(302, "", { location: "/elsewhere" })],
    ];
    for (const [name, script] of cases) {
      const n = await node(script);
      const limiter = new Limiter({ nodes: [n.addr], onFailure: "open", timeoutMs: 5000 });
      const d = await limiter.allow({ key: "k", limit }).catch((error: unknown) => assert.fail(`${name}: threw ${error}`));
      assert.equal(d.degraded, true, `${name}: not degraded`);
      assert.equal(d.allowed, true, `${name}: not the failure policy's admission`);
      assert.ok(d.cause instanceof UnavailableError && d.cause.outcomeUnknown, `${name}: cause ${d.cause}`);
    }
    assert.ok(written.bytes < maxAnswerBytes * 4, `the endless body was read to ${written.bytes} bytes`);
  });

  it("answers a malformed batch by the failure policy, and refuses a malformed lease with an UnavailableError", async () => {
    const item = '{"status":200,"allowed":true,"limit":5,"remaining":4,"reset_after_ms":100,"retry_after_ms":0}';
    for (const body of ["null", '{"responses":null}', `{"responses":[${item}]}`, `{"responses":[${item},null]}`, `{"responses":[${item},{"status":"200"}]}`]) {
      const n = await node(raw(200, body));
      const out = await new Limiter({ nodes: [n.addr], onFailure: "closed" }).allowBatch([{ key: "a", limit }, { key: "b", limit }]);
      assert.deepEqual(
        out.map((d) => !(d instanceof Error) && d.degraded && !d.allowed),
        [true, true],
        body,
      );
    }
    const n = await node(raw(200, "null"));
    await assert.rejects(new Limiter({ nodes: [n.addr] }).acquireLease({ key: "k", max: 1, ttl: "1s" }), (e: unknown) => e instanceof UnavailableError);
  });

  it("reads a 429's Retry-After as whole seconds, at most a day", async () => {
    const denied = '{"allowed":false,"limit":5,"remaining":0,"reset_after_ms":100,"retry_after_ms":3000}';
    const cases: Array<[string, number]> = [
      ["7", 7],
      ["86401", maxRetryAfterSeconds],
      ["99999999999999999999", maxRetryAfterSeconds],
      ["-5", 0],
      ["1.5", 0],
      ["Wed, 21 Oct 2015 07:28:00 GMT", 0],
    ];
    for (const [header, want] of cases) {
      const n = await node(raw(429, denied, { "retry-after": header }));
      const d = await new Limiter({ nodes: [n.addr], onFailure: "throw" }).allow({ key: "k", limit });
      assert.equal(d.retryAfterSeconds, want, header);
    }
  });

  it("waits a second, not a negative time, for a 503 whose Retry-After is not a number of seconds", async () => {
    const flaky = await node(answer(503, JSON.stringify({ error: "busy", code: "unavailable" }), { "retry-after": "-1" }), answer(200, allowed));
    const retries: RetryEvent[] = [];
    const limiter = new Limiter({ nodes: [flaky.addr], onFailure: "throw", timeoutMs: 5000, onRetry: (e) => retries.push(e) });
    assert.equal((await limiter.allow({ key: "k", limit })).allowed, true);
    assert.deepEqual(
      retries.map((r) => r.delayMs),
      [1000],
    );
  });

  it("asks the next node at once after a 503, and does not prefer the node that answered it", async () => {
    const down = await node(unavailable);
    const up = await node(answer(200, allowed));
    const retries: RetryEvent[] = [];
    const limiter = new Limiter({ nodes: [down.addr, up.addr], onFailure: "throw", timeoutMs: 5000, onRetry: (e) => retries.push(e) });
    const start = performance.now();
    const d = await limiter.allow({ key: "k", limit });
    assert.equal(d.allowed, true);
    assert.deepEqual(
      retries.map((r) => r.delayMs),
      [0],
    );
    assert.ok(performance.now() - start < 900, "the call waited out the 503's Retry-After");
    assert.equal((await limiter.allow({ key: "k", limit })).attempts, 1);
    assert.equal(down.bodies.length, 1);
  });

  it("gives up on a dripped answer at the timeout", async () => {
    const slow = await node(drip);
    const start = performance.now();
    const d = await new Limiter({ nodes: [slow.addr], onFailure: "closed", timeoutMs: 600 }).allow({ key: "k", limit });
    assert.equal(d.degraded, true);
    assert.ok(performance.now() - start < 1500, `took ${performance.now() - start} ms`);
  });
});
