// ShareTable holds shares of keys' budgets for whoever spends them (here,
// a Limiter with localShares): which key is hot enough to ask for a share,
// how much to ask for, spending a share until it ends, asking for the next
// one before it runs out, and what to give back at the end. It is the rule
// of the Go client and the cluster's nodes (internal/sharetable), written
// for this client.
//
// It knows nothing of how a share is asked for or granted: the caller sends
// the asks the table says to, and settles their answers. Exactness is the
// granter's (the cluster charges a share as if every unit were spent at its
// end); the table's part is to stop spending by the deadline the grant
// gives, measured on the monotonic clock from when the request that brought
// it was sent.
//
// What a holder does not spend it gives back (giveBack), so that a share
// costs the key only what was spent: a share is retired, and what is left of
// it given back, as soon as a newer share of its key arrives, or once only a
// quarter of its time is left (early enough for the return to reach the
// granter before the share ends; a return after that gives nothing back).
// Only a holder that vanishes loses units, until its shares end.

/** maxShareKeys bounds the keys a table tracks; beyond it, requests of new keys are sent as without shares. */
export const maxShareKeys = 1 << 16;

/** How many requests of a key within a share's TTL make the table ask for a share of it. */
const hotAfter = 2;

/** The size of the table that spots hot keys before they get an entry: keys seen once cost a slot of it, not an entry. */
const sightings = 1 << 16;

/** How often, at most, a full table drops the entries of keys that hold nothing and went quiet, in ms. */
const sweepEveryMs = 1000;

/**
 * Grant is a share as its holder keeps it: `token` names it to the granter
 * (and proves the holder holds it); `units` may be spent until
 * `spendForMs` has passed since the request that brought it was sent.
 */
export interface Grant {
  token: string;
  units: number;
  spendForMs: number;
}

/** ShareReturn is an unspent share to give back: what names its key to the granter, the share's token and what is left of it. */
export interface ShareReturn<K> {
  key: K;
  token: string;
  unspent: number;
}

/** ShareKey describes a request to take: its key's name (the table's key) and what names the key to the granter, the shares' TTL, the most one share should hold, and the request's cost. */
export interface ShareKey<K> {
  name: string;
  id: K;
  ttlMs: number;
  most: number;
  cost: number;
}

/** Taken is what take tells the caller to do with a request. */
export interface Taken<T> {
  /**
   * Admit the request from a share: `template` is the grant's, `sinceMs`
   * the time since its request was sent, `left` what the holder has left
   * of the key's live shares after this request.
   */
  answered: boolean;
  template?: T;
  sinceMs: number;
  left: number;
  /** When positive, the share to ask for with the request; the caller must settle the key once it has the answer. */
  ask: number;
  /** When positive, the share to ask for in the background (a request of cost 0); the caller must settle it too. */
  renew: number;
}

const sendAsItIs: Taken<never> = { answered: false, sinceMs: 0, left: 0, ask: 0, renew: 0 };

/** What the table remembers of a key without an entry: its hash, when it was first seen lately, and how often and for how many units since. */
interface Sighting {
  hash: number;
  since: number;
  times: number;
  units: number;
}

/** One share. Times are on the table's monotonic clock, in ms. */
interface Held<T> {
  token: string;
  units: number;
  left: number;
  /** Spent no later than this. */
  until: number;
  /** Given back from this on. */
  retireAt: number;
  sentAt: number;
  template: T;
}

/** Asking is an ask under way: `done` settles when it is answered. */
interface Asking {
  done: Promise<void>;
  answered: () => void;
}

function asking(): Asking {
  let answered = () => {};
  const done = new Promise<void>((resolve) => (answered = resolve));
  return { done, answered };
}

/** Entry is what the table holds of, and knows about, one key. */
class Entry<K, T> {
  ttlMs = 0;
  most = 0;
  /** Oldest first. */
  shares: Array<Held<T>> = [];
  asking: Asking | undefined;
  // What the holder saw of the key: requests and units in the current
  // window (a TTL long, from seenFrom) and the one before.
  requests: number;
  lastRequests = 0;
  units: number;
  lastUnits = 0;
  lastUsed = 0;
  // granted: the last ask brought a share; renewing: the ask under way is
  // a renewal.
  granted = false;
  renewing = false;

  constructor(
    readonly id: K,
    public seenFrom: number,
    before: Sighting,
  ) {
    // The sightings before this request count as the entry's own.
    this.requests = before.times;
    this.units = before.units;
  }

  /** see counts a request of cost on the key. */
  see(now: number, cost: number): void {
    if (now - this.seenFrom >= this.ttlMs) {
      [this.lastRequests, this.lastUnits] = now - this.seenFrom >= 2 * this.ttlMs ? [0, 0] : [this.requests, this.units];
      [this.requests, this.units, this.seenFrom] = [0, 0, now];
    }
    this.requests++;
    this.units += cost;
    this.lastUsed = now;
  }

  /** left is what the holder has left in live shares of the key. */
  left(now: number): number {
    let n = 0;
    for (const h of this.shares) {
      if (now < h.until) n += h.left;
    }
    return n;
  }

  /** ask is the share to ask for: twice what the holder admitted of the key in the last TTL, at least twice cost and at least 2, at most most. */
  ask(cost: number): number {
    return Math.min(Math.max(2 * Math.max(this.units, this.lastUnits), 2 * cost, 2), this.most);
  }

  /** renewal returns the share to ask for in the background when one is due (the newest share half spent or half over) and none is under way; 0 otherwise. */
  renewal(now: number, closed: boolean): number {
    if (this.asking !== undefined || this.renewing || closed || this.shares.length === 0) {
      return 0;
    }
    const newest = this.shares[this.shares.length - 1];
    if (2 * newest.left > newest.units && 2 * (newest.until - now) > newest.until - newest.sentAt) {
      return 0;
    }
    this.renewing = true;
    this.asking = asking();
    return this.ask(0);
  }
}

/** hashOf hashes a key's name for the sightings (FNV-1a over its UTF-16 code units, from a seed of the table's own). */
function hashOf(seed: number, name: string): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < name.length; i++) {
    h = Math.imul(h ^ name.charCodeAt(i), 0x01000193) >>> 0;
  }
  return h;
}

/**
 * ShareTable is one holder's shares, by key. K is what the holder keeps of
 * a key to name it when it gives a share back; T is what it keeps of a
 * grant to answer from it. Times are ms on a monotonic clock (now).
 */
export class ShareTable<K, T> {
  /**
   * giveBack, when set, is handed what is left of the shares the table
   * retires (see the top of this file), outside the call that retired
   * them, to give back to the granter. Without it, what is left of a
   * retired share is let go.
   */
  giveBack: ((returns: Array<ShareReturn<K>>) => void) | undefined;

  private readonly byKey = new Map<string, Entry<K, T>>();
  private readonly seed = globalThis.crypto.getRandomValues(new Uint32Array(1))[0];
  /** Direct-mapped by the key's hash. */
  private readonly seen: Array<Sighting | undefined> = new Array(sightings);
  private lastSweep = -Infinity;
  /** The holder is stopping: it takes no more. */
  private closed = false;

  /**
   * The table reads time from now (ms, monotonic), and runs a function
   * after a while with after (a timer that keeps no process alive).
   */
  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly after: (ms: number, f: () => void) => void = (ms, f) => void setTimeout(f, ms).unref(),
  ) {}

  /**
   * take answers a request of k.cost on key k.name from a share the holder
   * has, or says how to send it: with a share ask when the key is hot and no
   * ask is under way, else as it is. While an ask of the key that brought a
   * share last time is under way, it waits for its answer once, until
   * `waitMs` has passed or `signal` aborts.
   */
  async take(k: ShareKey<K>, waitMs: number, signal?: AbortSignal): Promise<Taken<T>> {
    let counted = false;
    let waited = false;
    for (;;) {
      const now = this.now();
      const e = this.entry(k, now, !counted);
      if (e === undefined) {
        return sendAsItIs;
      }
      if (!counted) {
        e.see(now, k.cost);
        counted = true;
      }
      const [h, retired] = this.spendable(e, now, k.cost);
      this.handBack(retired);
      if (h !== undefined) {
        h.left -= k.cost;
        return { answered: true, template: h.template, sinceMs: now - h.sentAt, left: e.left(now), ask: 0, renew: e.renewal(now, this.closed) };
      }
      if (e.asking === undefined && !waited) {
        if (e.requests + e.lastRequests >= hotAfter && !this.closed) {
          e.asking = asking();
          return { ...sendAsItIs, ask: e.ask(k.cost) };
        }
        return sendAsItIs;
      }
      if (e.asking === undefined || waited || !e.granted) {
        // Waiting again, or for an ask that will likely bring nothing,
        // would line the key's requests up one by one.
        return sendAsItIs;
      }
      if (!(await answeredWithin(e.asking.done, waitMs, signal))) {
        return sendAsItIs;
      }
      waited = true;
    }
  }

  /**
   * entry returns k's entry; undefined when it has none and is not yet seen
   * often enough for one (a sighting counts when sighted), or the table is
   * full.
   */
  private entry(k: ShareKey<K>, now: number, sighted: boolean): Entry<K, T> | undefined {
    let e = this.byKey.get(k.name);
    if (e === undefined) {
      if (!sighted) {
        return undefined;
      }
      const before = this.sight(k, now);
      if (before === undefined || (this.byKey.size >= maxShareKeys && !this.sweep(now))) {
        return undefined;
      }
      e = new Entry<K, T>(k.id, before.since, before);
      this.byKey.set(k.name, e);
    }
    e.ttlMs = k.ttlMs;
    e.most = k.most;
    return e;
  }

  /**
   * sight counts a request of a key without an entry and, once the key is
   * hot enough for one (seen hotAfter times within a TTL), returns what was
   * seen of it before this request. Two keys that share a slot only make
   * each other look colder.
   */
  private sight(k: ShareKey<K>, now: number): Sighting | undefined {
    const hash = hashOf(this.seed, k.name);
    const slot = hash % sightings;
    let s = this.seen[slot];
    if (s === undefined || s.hash !== hash || now - s.since >= k.ttlMs) {
      s = { hash, since: now, times: 0, units: 0 };
      this.seen[slot] = s;
    }
    if (s.times + 1 < hotAfter) {
      s.times++;
      s.units += k.cost;
      return undefined;
    }
    this.seen[slot] = undefined;
    return s;
  }

  /**
   * sweep drops the entries of keys that hold nothing and were not used for
   * a TTL, at most once a second (a full table of busy keys stays full), and
   * reports whether that made room.
   */
  private sweep(now: number): boolean {
    if (now - this.lastSweep < sweepEveryMs) {
      return false;
    }
    this.lastSweep = now;
    for (const [name, e] of this.byKey) {
      if (e.asking === undefined && !e.renewing && e.left(now) === 0 && now - e.lastUsed > e.ttlMs) {
        this.byKey.delete(name);
      }
    }
    return this.byKey.size < maxShareKeys;
  }

  /**
   * spendable returns the oldest share with cost left that has not ended,
   * after dropping the ones that ended or are spent and retiring the ones
   * due (what is left of them to give back: retired).
   */
  private spendable(e: Entry<K, T>, now: number, cost: number): [Held<T> | undefined, Array<ShareReturn<K>>] {
    let found: Held<T> | undefined;
    const retired: Array<ShareReturn<K>> = [];
    e.shares = e.shares.filter((h) => {
      if (now >= h.until) return false;
      if (this.giveBack !== undefined && now >= h.retireAt) {
        this.retire(e, h, retired);
        return false;
      }
      if (h.left === 0 && cost > 0) return false;
      if (found === undefined && h.left >= cost) found = h;
      return true;
    });
    return [found, retired];
  }

  /**
   * retire lets go of share h of e, which the caller drops from e.shares,
   * and appends what is left of it to give back to returns. (A table
   * without giveBack retires a share only for a newer one: what is left of
   * it is let go.)
   */
  private retire(e: Entry<K, T>, h: Held<T>, returns: Array<ShareReturn<K>>): void {
    if (h.left > 0 && this.giveBack !== undefined) {
      returns.push({ key: e.id, token: h.token, unspent: h.left });
    }
    h.left = 0;
  }

  /** handBack hands returns to giveBack, outside the current call. */
  private handBack(returns: Array<ShareReturn<K>>): void {
    const giveBack = this.giveBack;
    if (returns.length > 0 && giveBack !== undefined) {
      queueMicrotask(() => giveBack(returns));
    }
  }

  /**
   * retireWhenDue retires share h of key name once its time to be retired
   * has come, if it is still held then: run by a timer set when it was
   * settled, and set again if it ran early (a timer's clock is not quite
   * the table's).
   */
  private retireWhenDue(name: string, h: Held<T>): void {
    const e = this.byKey.get(name);
    const i = e?.shares.indexOf(h) ?? -1;
    if (e === undefined || i < 0) {
      return;
    }
    const early = h.retireAt - this.now();
    if (early > 0) {
      this.after(early, () => this.retireWhenDue(name, h));
      return;
    }
    const retired: Array<ShareReturn<K>> = [];
    this.retire(e, h, retired);
    e.shares.splice(i, 1);
    this.handBack(retired);
  }

  /**
   * settle takes the answer to an ask (from take's ask or renew) of key
   * name, sent at sentAt: the grant, undefined when the ask failed or
   * brought no share, is held from now on with its template, and the key's
   * older shares are retired; the requests waiting for the ask look again.
   * A share granted after the holder began to stop is given back whole.
   */
  settle(name: string, sentAt: number, granted?: { grant: Grant; template: T }): void {
    const e = this.byKey.get(name);
    if (e === undefined) {
      return;
    }
    e.asking?.answered();
    e.asking = undefined;
    e.renewing = false;
    e.granted = granted !== undefined;
    if (granted === undefined || granted.grant.spendForMs <= 0) {
      return;
    }
    const { grant: g, template } = granted;
    const retired: Array<ShareReturn<K>> = [];
    if (this.closed) {
      retired.push({ key: e.id, token: g.token, unspent: g.units });
      this.handBack(retired);
      return;
    }
    for (const old of e.shares) {
      this.retire(e, old, retired);
    }
    const h: Held<T> = {
      token: g.token,
      units: g.units,
      left: g.units,
      until: sentAt + g.spendForMs,
      retireAt: sentAt + g.spendForMs - g.spendForMs / 4,
      sentAt,
      template,
    };
    e.shares = [h];
    if (this.giveBack !== undefined) {
      this.after(h.retireAt - this.now(), () => this.retireWhenDue(name, h));
    }
    this.handBack(retired);
  }

  /** close lets go of every share, takes no more, and returns the live ones with units left: what the holder gives back as it stops. */
  close(): Array<ShareReturn<K>> {
    this.closed = true;
    const now = this.now();
    const out: Array<ShareReturn<K>> = [];
    for (const e of this.byKey.values()) {
      for (const h of e.shares) {
        if (h.left > 0 && now < h.until) out.push({ key: e.id, token: h.token, unspent: h.left });
      }
      e.shares = [];
    }
    return out;
  }
}

/** answeredWithin waits for done until waitMs has passed or signal aborts, and reports whether done came first. */
async function answeredWithin(done: Promise<void>, waitMs: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted || waitMs <= 0) {
    return false;
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort = () => {};
  const given = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), waitMs);
    onAbort = () => resolve(false);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([done.then(() => true), given]);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}
