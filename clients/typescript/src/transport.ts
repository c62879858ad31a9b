// One HTTP exchange with one node, and what its failure means: a request
// that provably never left (the connection could not be opened) may go to
// the next node as it is; one that may have reached a node has an unknown
// outcome, and only a request the cluster deduplicates may be sent again.

import { MalformedAnswer } from "./answers.js";

/** Attempt is what one exchange came to. */
export type Attempt =
  | { kind: "answer"; status: number; headers: Headers; body: string }
  | { kind: "notSent"; error: unknown }
  | { kind: "unknown"; error: unknown }
  | { kind: "malformed"; error: MalformedAnswer };

/** The most of an answer's body a client reads: 8 MiB. A longer answer is malformed, read no further. */
export const maxAnswerBytes = 8 << 20;

/** The error codes of a connection that was never opened: nothing was sent. */
const notSentCodes = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/** codesOf finds the system error codes under a fetch failure: its cause chain and an AggregateError's errors. */
function codesOf(error: unknown): string[] {
  const codes: string[] = [];
  for (let e: unknown = error, depth = 0; e !== null && typeof e === "object" && depth < 5; depth++) {
    const { code, errors, cause } = e as { code?: unknown; errors?: unknown; cause?: unknown };
    if (typeof code === "string") codes.push(code);
    if (Array.isArray(errors)) {
      for (const inner of errors) codes.push(...codesOf(inner));
    }
    e = cause;
  }
  return codes;
}

/** wasNotSent reports whether a fetch failure happened before anything was sent. */
export function wasNotSent(error: unknown): boolean {
  const codes = codesOf(error);
  return codes.length > 0 && codes.every((c) => notSentCodes.has(c));
}

/** Exchange is what exchange needs for one request. */
export interface Exchange {
  url: string;
  method: string;
  body: string | undefined;
  token: string | undefined;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  fetch: typeof fetch;
}

/**
 * exchange sends one request and reads its whole answer, at most
 * maxAnswerBytes of it, within timeoutMs. It never throws: a failure is an
 * Attempt of kind notSent, unknown or malformed. A request aborted by its
 * own timeout or by the caller's signal has an unknown outcome, since it
 * may already have been sent. A redirect is an answer like any other (the
 * API never redirects these calls), not a place to send the request.
 */
export async function exchange(x: Exchange): Promise<Attempt> {
  const timeout = AbortSignal.timeout(Math.max(1, Math.ceil(x.timeoutMs)));
  const signal = x.signal ? AbortSignal.any([x.signal, timeout]) : timeout;
  const headers: Record<string, string> = { accept: "application/json" };
  if (x.body !== undefined) headers["content-type"] = "application/json";
  if (x.token) headers.authorization = `Bearer ${x.token}`;
  let resp: Response;
  try {
    resp = await x.fetch(x.url, { method: x.method, headers, body: x.body, signal, redirect: "manual" });
  } catch (error) {
    return wasNotSent(error) ? { kind: "notSent", error } : { kind: "unknown", error };
  }
  try {
    return { kind: "answer", status: resp.status, headers: resp.headers, body: await readBounded(resp) };
  } catch (error) {
    if (error instanceof MalformedAnswer) return { kind: "malformed", error };
    return { kind: "unknown", error }; // the answer was cut off: decided, but we cannot tell how
  }
}

/** readBounded reads a body as UTF-8, or throws a MalformedAnswer past maxAnswerBytes or for bytes that are not UTF-8. */
async function readBounded(resp: Response): Promise<string> {
  const declared = Number(resp.headers.get("content-length") ?? "0");
  if (declared > maxAnswerBytes) {
    await resp.body?.cancel();
    throw new MalformedAnswer(`an answer of ${declared} bytes, over ${maxAnswerBytes}`);
  }
  if (resp.body === null) return "";
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of resp.body as unknown as AsyncIterable<Uint8Array>) {
    total += chunk.byteLength;
    if (total > maxAnswerBytes) {
      await resp.body.cancel().catch(() => {});
      throw new MalformedAnswer(`an answer over ${maxAnswerBytes} bytes`);
    }
    chunks.push(chunk);
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
  } catch {
    throw new MalformedAnswer("an answer that is not UTF-8");
  }
}

/** baseURL turns "host:port" into "http://host:port"; a URL stays as given, less a trailing slash. */
export function baseURL(address: string): string {
  const url = /^https?:\/\//.test(address) ? address : `http://${address}`;
  return url.replace(/\/+$/, "");
}

/** sleep waits ms, or until signal aborts (then it throws the signal's reason). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
