// The operator's side of the API, as the Limiter calls it: a key's state,
// a page of keys and a key's reset; blocks; policies. Reads are retried
// like decisions; puts are idempotent; deletions are not sent twice.

import { readBlock, readBlockPage, readDeleted, readKeyPage, readKeyReset, readKeyState, readPolicy, readPolicyPage } from "./answers.js";
import { idempotentCall, onceCall, readCall, type CallOptions, type Request } from "./client.js";
import type { Block, BlockPage, KeyPage, KeyState, Policy, PolicyPage, PolicyRequest } from "./types.js";

/** Listing picks a page: the entries after `after`, up to `limit` (1 to 1,000; the server's default 100). */
export interface Listing {
  after?: string;
  limit?: number;
}

/** KeyListing picks a page of keys: those that start with `prefix`, after `after`, up to `limit`. */
export interface KeyListing extends Listing {
  prefix?: string;
}

const segment = encodeURIComponent;

/** query spells a listing as a query string. */
function query(page: KeyListing): string {
  const q = new URLSearchParams();
  if (page.prefix) q.set("prefix", page.prefix);
  if (page.after) q.set("after", page.after);
  if (page.limit !== undefined) q.set("limit", String(page.limit));
  const s = q.toString();
  return s === "" ? "" : `?${s}`;
}

export const getKey = (request: Request, key: string, o: CallOptions): Promise<KeyState> =>
  request("GET", `/v1/keys/${segment(key)}`, undefined, readCall, [200], (b) => readKeyState(b, "answer"), o);

export const listKeys = (request: Request, page: KeyListing, o: CallOptions): Promise<KeyPage> =>
  request("GET", `/v1/keys${query(page)}`, undefined, readCall, [200], (b) => readKeyPage(b, "answer"), o);

export const resetKey = (request: Request, key: string, o: CallOptions): Promise<number> =>
  request("DELETE", `/v1/keys/${segment(key)}`, undefined, onceCall, [200], (b) => readKeyReset(b, "answer").limits, o);

export const putBlock = (request: Request, key: string, ttl: string, reason: string, o: CallOptions): Promise<Block> =>
  request("PUT", `/v1/blocks/${segment(key)}`, reason ? { ttl, reason } : { ttl }, idempotentCall, [200], (b) => readBlock(b, "answer"), o);

export const deleteBlock = (request: Request, key: string, o: CallOptions): Promise<Block> =>
  request("DELETE", `/v1/blocks/${segment(key)}`, undefined, onceCall, [200], (b) => readBlock(b, "answer"), o);

export const listBlocks = (request: Request, page: Listing, o: CallOptions): Promise<BlockPage> =>
  request("GET", `/v1/blocks${query(page)}`, undefined, readCall, [200], (b) => readBlockPage(b, "answer"), o);

export const putPolicy = (request: Request, name: string, policy: PolicyRequest, o: CallOptions): Promise<Policy> =>
  request("PUT", `/v1/policies/${segment(name)}`, policy, idempotentCall, [200], (b) => readPolicy(b, "answer"), o);

export const getPolicy = (request: Request, name: string, o: CallOptions): Promise<Policy> =>
  request("GET", `/v1/policies/${segment(name)}`, undefined, readCall, [200], (b) => readPolicy(b, "answer"), o);

export const listPolicies = (request: Request, page: Listing, o: CallOptions): Promise<PolicyPage> =>
  request("GET", `/v1/policies${query(page)}`, undefined, readCall, [200], (b) => readPolicyPage(b, "answer"), o);

export const deletePolicy = async (request: Request, name: string, o: CallOptions): Promise<void> => {
  await request("DELETE", `/v1/policies/${segment(name)}`, undefined, onceCall, [200], (b) => readDeleted(b, "answer"), o);
};
