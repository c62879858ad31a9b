// Reserve, then settle: a call whose cost is known only once it is done
// (the tokens a model streams, the rows an export writes) reserves the most
// it may cost, does its work, and settles with what it used. What it did
// not use is given back, what it used beyond is charged (up to the
// policy's max_debt beyond empty), and a reservation never settled stays
// charged in full when its TTL ends.

import type { CallOptions, Decision, Limiter } from "./client.js";
import type { Settlement } from "./types.js";

/** Reservation is an admission to settle: its decision, and what settles it. */
export class Reservation {
  /** The decision: an admission with a `settlement_id`, or a denial (or the failure policy's decision) with nothing to settle. */
  readonly decision: Decision;
  private readonly limiter: Limiter;

  constructor(decision: Decision, limiter: Limiter) {
    this.decision = decision;
    this.limiter = limiter;
  }

  /**
   * settle settles the reservation with `used`, what the work cost, as
   * Limiter.settle does (asking again with the same cost while the outcome
   * is unknown, charged once). A reservation with nothing to settle (a
   * denial, or the failure policy's decision) answers null.
   */
  async settle(used: number, options: CallOptions = {}): Promise<Settlement | null> {
    const id = this.decision.settlement_id;
    return id === undefined ? null : this.limiter.settle(id, used, options);
  }
}
