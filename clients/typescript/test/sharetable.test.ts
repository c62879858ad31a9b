// The rule of local shares (src/sharetable.ts), on a clock and timers the
// test moves: when a key is asked for, how much, spending until the
// deadline, renewing, retiring and giving back, closing. The same walks as
// the Go table's tests (internal/sharetable).

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ShareTable, type ShareKey, type ShareReturn } from "../src/sharetable.js";

/** A clock the test moves, with the timers the table sets on it. */
class FakeClock {
  ms = 1_000_000;
  private timers: Array<{ at: number; f: () => void }> = [];
  readonly now = () => this.ms;
  readonly after = (ms: number, f: () => void) => {
    this.timers.push({ at: this.ms + ms, f });
  };
  advance(ms: number): void {
    this.ms += ms;
  }
  /** runDue runs the timers due. */
  runDue(): void {
    const due = this.timers.filter((t) => t.at <= this.ms);
    this.timers = this.timers.filter((t) => t.at > this.ms);
    for (const t of due) t.f();
  }
}

const key = (cost: number, name = "k"): ShareKey<string> => ({ name, id: `${name}'s name`, ttlMs: 1000, most: 100, cost });

/** table is a table on clock that gives back into given (after the call that retired them, as the table hands them on). */
function table(clock: FakeClock, given?: Array<Array<ShareReturn<string>>>): ShareTable<string, string> {
  const t = new ShareTable<string, string>(clock.now, clock.after);
  if (given !== undefined) t.giveBack = (r) => given.push(r);
  return t;
}

/** handedOn lets the give-backs the table queued run. */
const handedOn = () => new Promise<void>((r) => setImmediate(r));

describe("the share table", () => {
  it("answers a steady key from its shares: asks on the second request, renews when half spent, gives back on renewal, on retiring and on close", async () => {
    const clock = new FakeClock();
    const given: Array<Array<ShareReturn<string>>> = [];
    const t = table(clock, given);
    let got = await t.take(key(1), 1000);
    assert.deepEqual([got.answered, got.ask], [false, 0], "the first request is sent as it is");
    got = await t.take(key(1), 1000);
    assert.deepEqual([got.answered, got.ask], [false, 4], "the second asks for twice the 2 units seen");
    t.settle("k", clock.ms, { grant: { token: "7", units: 4, spendForMs: 500 }, template: "template" });

    const steps = [
      { name: "from the share", advance: 10, left: 3, renew: false },
      { name: "half spent: a renewal is due", advance: 0, left: 2, renew: true },
      { name: "a renewal under way is not asked again", advance: 0, left: 1, renew: false },
    ];
    for (const s of steps) {
      clock.advance(s.advance);
      got = await t.take(key(1), 1000);
      assert.deepEqual([got.answered, got.left, got.template, got.renew > 0], [true, s.left, "template", s.renew], s.name);
    }
    t.settle("k", clock.ms, { grant: { token: "8", units: 10, spendForMs: 500 }, template: "renewed" });
    await handedOn();
    assert.deepEqual(given.shift(), [{ key: "k's name", token: "7", unspent: 1 }], "the renewal gives back the unit left of the older share");
    for (const left of [9, 8]) {
      got = await t.take(key(1), 1000);
      assert.deepEqual([got.answered, got.template, got.left], [true, "renewed", left]);
    }
    clock.advance(400);
    got = await t.take(key(1), 1000);
    assert.equal(got.answered, false, "a share with a quarter of its time left answers no more");
    await handedOn();
    assert.deepEqual(given.shift(), [{ key: "k's name", token: "8", unspent: 8 }], "retiring the share gives back its 8 units");

    t.settle("k", clock.ms, { grant: { token: "9", units: 6, spendForMs: 500 }, template: "last" });
    await t.take(key(2), 1000);
    assert.deepEqual(t.close(), [{ key: "k's name", token: "9", unspent: 4 }]);
    for (const name of ["k", "a key first seen after close"]) {
      await t.take(key(1, name), 1000);
      got = await t.take(key(1, name), 1000);
      assert.deepEqual([got.answered, got.ask], [false, 0], `a closed table answers or asks for ${name}`);
    }
    t.settle("k", clock.ms, { grant: { token: "10", units: 3, spendForMs: 500 }, template: "late" });
    await handedOn();
    assert.deepEqual(given.shift(), [{ key: "k's name", token: "10", unspent: 3 }], "a share granted after close is given back whole");
  });

  it("makes requests wait once for an ask under way that brought a share before, and not for one that brought nothing", async () => {
    const clock = new FakeClock();
    const t = table(clock);
    await t.take(key(1), 1000);
    await t.take(key(1), 1000); // asks
    t.settle("k", clock.ms, { grant: { token: "1", units: 1, spendForMs: 1000 }, template: "a" });
    let got = await t.take(key(1), 1000);
    assert.ok(got.answered && got.renew > 0, "spending the share answers, and asks for a renewal");
    let answered = false;
    const waiting = t.take(key(1), 5000).then((g) => ((answered = true), g));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(answered, false, "answered while an ask was under way");
    t.settle("k", clock.ms, { grant: { token: "2", units: 5, spendForMs: 1000 }, template: "b" });
    got = await waiting;
    assert.deepEqual([got.answered, got.template], [true, "b"], "the waiting request takes from the new share");

    // Asks that bring nothing (the renewal, then the ask once the share is
    // spent): the next one is not waited for.
    for (;;) {
      got = await t.take(key(1), 1000);
      if (got.renew > 0) t.settle("k", clock.ms);
      if (!got.answered) break;
    }
    t.settle("k", clock.ms);
    got = await t.take(key(1), 1000);
    assert.ok(got.ask > 0, "an ask");
    const start = performance.now();
    got = await t.take(key(1), 1000);
    assert.deepEqual([got.answered, got.ask], [false, 0]);
    assert.ok(performance.now() - start < 500, "waited for an ask after one that brought nothing");
  });

  it("stops waiting for an ask at the wait given", async () => {
    const clock = new FakeClock();
    const t = table(clock);
    await t.take(key(1), 1000);
    await t.take(key(1), 1000);
    t.settle("k", clock.ms, { grant: { token: "1", units: 1, spendForMs: 1000 }, template: "a" });
    assert.ok((await t.take(key(1), 1000)).renew > 0);
    const start = performance.now();
    const got = await t.take(key(1), 50);
    assert.deepEqual([got.answered, got.ask], [false, 0]);
    assert.ok(performance.now() - start < 1000);
  });

  for (const giving of [true, false]) {
    it(`${giving ? "retires an idle key's share with a quarter of its time left and gives back what is left" : "without giveBack, spends a share to its end"}`, async () => {
      const clock = new FakeClock();
      const given: Array<Array<ShareReturn<string>>> = [];
      const t = table(clock, giving ? given : undefined);
      await t.take(key(1), 1000);
      await t.take(key(1), 1000);
      t.settle("k", clock.ms, { grant: { token: "1", units: 10, spendForMs: 400 }, template: "a" });
      await t.take(key(3), 1000);
      clock.advance(299);
      clock.runDue();
      let got = await t.take(key(1), 1000);
      assert.deepEqual([got.answered, got.left, got.renew > 0], [true, 6, true], "before its time to retire");
      t.settle("k", clock.ms); // the renewal brought nothing
      clock.advance(1);
      clock.runDue();
      await handedOn();
      if (!giving) {
        got = await t.take(key(1), 1000);
        assert.deepEqual([got.answered, got.left], [true, 5], "past its time to retire");
        clock.advance(100);
        assert.equal((await t.take(key(1), 1000)).answered, false, "at its end");
        return;
      }
      assert.deepEqual(given, [[{ key: "k's name", token: "1", unspent: 6 }]]);
      assert.equal((await t.take(key(1), 1000)).answered, false, "a retired share answered");
      assert.deepEqual(t.close(), [], "close gave back again");
    });
  }

  it("spends a share until its deadline, measured from the send, and no later", async () => {
    const clock = new FakeClock();
    const t = table(clock);
    await t.take(key(1), 1000);
    await t.take(key(1), 1000);
    const sentAt = clock.ms;
    clock.advance(30); // the answer took 30 ms
    t.settle("k", sentAt, { grant: { token: "1", units: 50, spendForMs: 100 }, template: "a" });
    clock.advance(69);
    assert.equal((await t.take(key(1), 1000)).answered, true, "1 ms before the deadline");
    clock.advance(1);
    assert.equal((await t.take(key(1), 0)).answered, false, "at the deadline (with its renewal under way, not waited for)");
  });
});
