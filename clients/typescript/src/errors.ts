// The two kinds of failure a caller tells apart: the API refused the
// request (the caller's mistake, never hidden by a failure policy), or the
// cluster could not decide it (which a failure policy answers).

import type { LeaseDenied } from "./types.js";

/**
 * LimitnodeError is an error answer of the API: `status` and the body's
 * `code` and `field` (the JSON path of the field at fault, when one is).
 * A 4xx other than 429 is one of these: the request as it stands is refused.
 */
export class LimitnodeError extends Error {
  /** The HTTP status, or undefined when no node answered. */
  readonly status: number | undefined;
  /** The body's code: invalid_argument, not_found, conflict, unavailable, ... */
  readonly code: string;
  /** The JSON path of the field at fault, when one is. */
  readonly field: string | undefined;

  constructor(message: string, status: number | undefined, code: string, field?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "LimitnodeError";
    this.status = status;
    this.code = code;
    this.field = field;
  }

  /**
   * fromBody is the error a node answered with status and body: a
   * LimitnodeError for a 4xx, the request's refusal; an UnavailableError
   * for anything else (a 5xx, or a status the API does not answer, such as
   * a proxy's redirect), which means the cluster could not decide.
   */
  static fromBody(status: number, body: string): LimitnodeError {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
    const fields = typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : {};
    const text = (v: unknown) => (typeof v === "string" ? v : undefined);
    const code = text(fields.code) ?? "unknown";
    const field = text(fields.field);
    const where = field ? ` (${field})` : "";
    const message = `limitnode: ${status} ${code}${where}: ${text(fields.error) ?? body.slice(0, 200)}`;
    return status >= 400 && status < 500
      ? new LimitnodeError(message, status, code, field)
      : new UnavailableError(message, { status, code, field, outcomeUnknown: status === 503 || status < 400 });
  }
}

/**
 * UnavailableError says the cluster could not decide: no node reachable,
 * a 503 (no leader in time, an outcome left unknown, the key cap), a 500,
 * or the call's timeout. When `outcomeUnknown` is true the request may have
 * been applied: a retry with the same request_id is answered once.
 */
export class UnavailableError extends LimitnodeError {
  /** True when the request may have been applied (it reached a node that did not answer it). */
  readonly outcomeUnknown: boolean;

  constructor(
    message: string,
    opts: { status?: number; code?: string; field?: string; outcomeUnknown: boolean; cause?: unknown },
  ) {
    super(message, opts.status, opts.code ?? "unavailable", opts.field, { cause: opts.cause });
    this.name = "UnavailableError";
    this.outcomeUnknown = opts.outcomeUnknown;
  }
}

/**
 * LeaseRefusedError is withLease's error when no slot was granted: every
 * slot was held (and, with max_wait, the queue was full or the wait ran
 * out). `lease` is the refusal as the node answered it, with
 * `retry_after_ms`.
 */
export class LeaseRefusedError extends Error {
  readonly lease: LeaseDenied;

  constructor(lease: LeaseDenied) {
    const waited = lease.waited_ms ? ` after waiting ${lease.waited_ms} ms` : "";
    super(
      `limitnode: lease on ${JSON.stringify(lease.key)} refused${waited}: ${lease.active} of ${lease.max} held, ` +
        `${lease.waiting ?? 0} waiting; retry after ${lease.retry_after_ms} ms`,
    );
    this.name = "LeaseRefusedError";
    this.lease = lease;
  }
}

/**
 * LeaseLostError is withLease's error when the lease stopped being held
 * while the work ran: a renewal or the final release found it gone
 * (expired, or given back elsewhere). It is also the reason of the work's
 * signal, aborted when a renewal finds the lease gone. `cause` is the
 * work's own error, or the answer that found the lease gone.
 */
export class LeaseLostError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "LeaseLostError";
  }
}
