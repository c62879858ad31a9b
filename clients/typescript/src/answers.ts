// Reading answers strictly: a body is parsed as JSON and held to the shape
// its schema in api/openapi.yaml gives (each field present when required,
// of its JSON type, integers whole and not negative), or it is a
// MalformedAnswer, never a value made of whatever was there. Fields the
// schema does not name are left as they are, so that a newer server's
// additions pass through.

import type {
  AllowResponse,
  BatchDecision,
  BatchError,
  Block,
  BlockPage,
  KeyPage,
  KeyReset,
  KeyState,
  LeaseDenied,
  LeaseGranted,
  Policy,
  PolicyPage,
  Settlement,
} from "./types.js";

/** MalformedAnswer is an answer that is not what the API answers. */
export class MalformedAnswer extends Error {
  constructor(message: string) {
    super(`limitnode: malformed answer: ${message}`);
    this.name = "MalformedAnswer";
  }
}

/** A reader checks a value found at a path and returns it typed. */
type Reader<T> = (value: unknown, path: string) => T;

const fail = (path: string, want: string, value: unknown): never => {
  const got = value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
  throw new MalformedAnswer(`${path} is ${got}, not ${want}`);
};

const bool: Reader<boolean> = (v, path) => (typeof v === "boolean" ? v : fail(path, "a boolean", v));
const str: Reader<string> = (v, path) => (typeof v === "string" ? v : fail(path, "a string", v));
/** count is a whole number from 0, exact in a number. */
const count: Reader<number> = (v, path) => (typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : fail(path, "a whole number from 0", v));
const trueOnly: Reader<true> = (v, path) => (v === true ? true : fail(path, "true", v));
const anything: Reader<unknown> = (v) => v;

const arrayOf =
  <T>(item: Reader<T>): Reader<T[]> =>
  (v, path) =>
    Array.isArray(v) ? v.map((x, i) => item(x, `${path}[${i}]`)) : fail(path, "an array", v);

const mapOf =
  <T>(item: Reader<T>): Reader<Record<string, T>> =>
  (v, path) => {
    const o = isObject(v) ? v : fail(path, "an object", v);
    for (const [k, x] of Object.entries(o)) item(x, `${path}.${k}`);
    return o as Record<string, T>;
  };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A field of an object: its reader, and whether it may be absent. */
interface Field {
  read: Reader<unknown>;
  optional?: boolean;
}
const req = (read: Reader<unknown>): Field => ({ read });
const opt = (read: Reader<unknown>): Field => ({ read, optional: true });

/** object reads an object with fields; the others are left as they are. */
const object =
  <T>(fields: Record<string, Field>): Reader<T> =>
  (v, path) => {
    const o = isObject(v) ? v : fail(path, "an object", v);
    for (const [name, f] of Object.entries(fields)) {
      if (o[name] === undefined) {
        if (!f.optional) throw new MalformedAnswer(`${path}.${name} is missing`);
        continue;
      }
      f.read(o[name], `${path}.${name}`);
    }
    return o as T;
  };

const limit = object({ algorithm: opt(str), rate: req(count), period: opt(str), burst: opt(count), local_shares: opt(anything) });
const checkResult = object({
  key: req(str),
  policy: opt(str),
  shadow: opt(trueOnly),
  allowed: req(bool),
  limit: req(count),
  remaining: req(count),
  reset_after_ms: req(count),
  retry_after_ms: req(count),
});
const decisionFields: Record<string, Field> = {
  allowed: req(bool),
  limit: req(count),
  remaining: req(count),
  reset_after_ms: req(count),
  retry_after_ms: req(count),
  wait_ms: opt(count),
  held_ms: opt(count),
  duplicate: opt(trueOnly),
  checks: opt(arrayOf(checkResult)),
  blocked: opt(object({ key: opt(str), reason: opt(str), penalty: opt(str), ends_in_ms: req(count) })),
  denied_by: opt(object({ check: req(count), policy: opt(str), policy_version: opt(count), limit: req(limit), cause: req(str) })),
  settlement_id: opt(str),
  share: opt(object({ id: req(str), units: req(count), spend_for_ms: req(count), remaining: req(count) })),
};

/** decision reads the body of a /v1/allow answer with status 200 or 429; `allowed` must agree with it. */
export function readDecision(v: unknown, status: number, path = "answer"): AllowResponse {
  const d = object<AllowResponse>(decisionFields)(v, path);
  if (d.allowed !== (status === 200)) {
    throw new MalformedAnswer(`${path}.allowed is ${d.allowed} with status ${status}`);
  }
  return d;
}

/** readBatch reads the body of a /v1/allow/batch answer to n requests. */
export function readBatch(v: unknown, n: number): Array<BatchDecision | BatchError> {
  const { responses } = object<{ responses: unknown[] }>({ responses: req(arrayOf(anything)) })(v, "answer");
  if (responses.length !== n) {
    throw new MalformedAnswer(`${responses.length} answers to a batch of ${n}`);
  }
  return responses.map((item, i) => {
    const path = `answer.responses[${i}]`;
    const { status } = object<{ status: number }>({ status: req(count) })(item, path);
    if (status === 200 || status === 429) {
      return { ...readDecision(item, status, path), status } as BatchDecision;
    }
    return object<BatchError>({ error: req(str), code: req(str), field: opt(str) })(item, path);
  });
}

const leaseFields = {
  granted: req(bool),
  key: req(str),
  max: req(count),
  active: req(count),
  id: opt(str),
  waiting: opt(count),
  expires_in_ms: opt(count),
  retry_after_ms: opt(count),
  waited_ms: opt(count),
};

/** readLease reads a lease's acquire (200 granted, 429 refused) or renewal answer. */
export function readLease(v: unknown, status: number): LeaseGranted | LeaseDenied {
  const lease = object<LeaseGranted | LeaseDenied>(leaseFields)(v, "answer");
  if (lease.granted !== (status === 200)) {
    throw new MalformedAnswer(`answer.granted is ${lease.granted} with status ${status}`);
  }
  if (lease.granted && typeof lease.id !== "string") {
    throw new MalformedAnswer("answer.id is missing from a granted lease");
  }
  return lease;
}

export const readSettlement: Reader<Settlement> = object({
  settlement_id: req(str),
  reserved: req(count),
  cost: req(count),
  refunded: req(count),
  charged: req(count),
  forgiven: opt(count),
  retry_after_ms: opt(count),
  duplicate: opt(trueOnly),
});

/** readShareReturned reads the answer of POST /v1/shares/return: the units given back. */
export const readShareReturned: Reader<{ returned: number }> = object({ returned: req(count) });

const keyState = object<KeyState>({
  key: req(str),
  limits: req(arrayOf(object({ owner: opt(str), limit: req(limit), remaining: req(count), reset_after_ms: req(count) }))),
});
export const readKeyState: Reader<KeyState> = keyState;
export const readKeyPage: Reader<KeyPage> = object({ keys: req(arrayOf(keyState)), next: opt(str) });
export const readKeyReset: Reader<KeyReset> = object({ reset: req(str), limits: req(count) });

const block = object<Block>({
  key: req(str),
  reason: opt(str),
  penalty: opt(str),
  since_unix_ms: req(count),
  until_unix_ms: req(count),
  ends_in_ms: req(count),
});
export const readBlock: Reader<Block> = block;
export const readBlockPage: Reader<BlockPage> = object({ blocks: req(arrayOf(block)), next: opt(str) });

const policy = object<Policy>({
  name: req(str),
  limit: req(limit),
  overrides: opt(mapOf(limit)),
  shadow: req(bool),
  key_template: opt(str),
  local_shares: opt(object({ ttl: opt(str), max_units: opt(count) })),
  shadow_denied: opt(count),
  version: opt(count),
  penalty: opt(object({ denials: req(count), within: req(str), block_for: req(str) })),
  max_debt: opt(count),
});
export const readPolicy: Reader<Policy> = policy;
export const readPolicyPage: Reader<PolicyPage> = object({ policies: req(arrayOf(policy)), next: opt(str) });
export const readDeleted: Reader<{ deleted: string }> = object({ deleted: req(str) });

/** parseJSON parses an answer's body, or throws a MalformedAnswer. */
export function parseJSON(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch (error) {
    throw new MalformedAnswer(`not JSON: ${(error as Error).message}`);
  }
}

/** The most Retry-After is read as: a day, in seconds. */
export const maxRetryAfterSeconds = 86_400;

/**
 * retryAfterSeconds reads a Retry-After header as delay-seconds, at most
 * maxRetryAfterSeconds; anything else (absent, an HTTP date, a negative or
 * malformed number) is undefined.
 */
export function retryAfterSeconds(value: string | null): number | undefined {
  if (value === null || !/^[0-9]+$/.test(value)) return undefined;
  return Math.min(Number(value), maxRetryAfterSeconds);
}
